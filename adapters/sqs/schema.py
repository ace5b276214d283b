"""The SQS hint queue, defined once: the adapter, `create_queue` (tests, demo, local endpoints)
and infra/ Terraform (checked against these names and settings) all use it.

A hint is a JSON body `{"connection_id": "<id>"}`. The article's router sent
`{"pk": "CONN#<id>"}`; bodies in that form are still understood so a fleet can be migrated
while old producers drain.
"""

DEFAULT_QUEUE_NAME = "wsfleet-connection-hints"
DLQ_SUFFIX = "-dlq"
# A hint that failed this many receives (the consumer kept crashing on it) moves to the DLQ.
MAX_RECEIVE_COUNT = 5
DEFAULT_VISIBILITY_TIMEOUT_S = 30
# Hints older than a few reconciliation cycles are worthless: reconciliation has found the
# connection by then. One hour keeps a backlog through an outage without hoarding.
MESSAGE_RETENTION_S = 3600

# Body fields.
CONNECTION_ID_FIELD = "connection_id"
# True on a copy (application/hints.py). Named before copies went out without a delay too;
# kept, so that hints in flight through a rolling deploy keep their meaning.
DELAYED_FIELD = "delayed"
ARTICLE_KEY_FIELD = "pk"
ARTICLE_KEY_PREFIX = "CONN#"

# API limits.
MAX_BATCH = 10
MAX_WAIT_S = 20
MAX_VISIBILITY_TIMEOUT_S = 43_200
