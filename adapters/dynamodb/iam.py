"""The DynamoDB actions each process calls, per table: the single source of truth for IAM.

infra/ grants exactly these (tests/infra compares the Terraform policies with this module), so
whoever adds a call to an adapter adds its action here, and the infra check says where Terraform
must follow. IAM authorizes the parts of a call, not the call:
- TransactWriteItems needs the action of each contained operation on its table
  (Update -> UpdateItem, Put -> PutItem, ConditionCheck -> ConditionCheckItem);
- an UpdateItem or DeleteItem with a condition needs no action beyond its own;
- BatchGetItem and BatchWriteItem are actions of their own;
- a Query on an index needs `dynamodb:Query` on the index ARN (`<table ARN>/index/<name>`).
"""

from collections.abc import Mapping
from types import MappingProxyType

# Resource keys: the tables by role, and the indexes of the connections table.
CONNECTIONS = "connections"
ORPHAN_INDEX = "connections/orphan-index"
OWNER_INDEX = "connections/owner-index"
STOP_INDEX = "connections/stop-index"
EVENTS = "events"
MESSAGES = "messages"
SESSIONS = "sessions"

Grants = Mapping[str, tuple[str, ...]]

WORKER: Grants = MappingProxyType(
    {
        # acquire, release and the other recorded transitions: GetItem, then a transaction of
        # an Update here + a Put of each event (+ ConditionChecks on sessions); checkpoint:
        # UpdateItem; a dead session's connections: BatchGetItem (see connection_store.py's
        # docstring for the calls of each operation).
        CONNECTIONS: ("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"),
        ORPHAN_INDEX: ("dynamodb:Query",),  # reconciliation and next_available_at
        OWNER_INDEX: ("dynamodb:Query",),  # a dead session's connections; forget_session
        STOP_INDEX: ("dynamodb:Query",),  # stop_requested
        # open: transaction Put; renew, end, an expiry found: UpdateItem (end and expiry in
        # a transaction with the log's Put); acquire:
        # ConditionCheck on the acquirer's and the dead owner's; reads: GetItem; orphan
        # discovery: Scan; forget_session: DeleteItem.
        SESSIONS: (
            "dynamodb:ConditionCheckItem",
            "dynamodb:DeleteItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:Scan",
            "dynamodb:UpdateItem",
        ),
        EVENTS: ("dynamodb:PutItem",),  # the ownership and session logs, in the transactions
        # the default message sink: BatchWriteItem per 25 messages, a PutItem per message
        # to find one the service refused in a batch, and Queries (a connection's mark, a
        # seq's copies, its prev links for the resume point on takeover)
        MESSAGES: ("dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:Query"),
    }
)

ROUTER: Grants = MappingProxyType(
    {
        # START/STOP: transaction of Update (the connection) + Put (the event); GET: GetItem.
        CONNECTIONS: ("dynamodb:GetItem", "dynamodb:UpdateItem"),
        # The owner's session, to say whether the lease is held and until when (a GetItem,
        # only for an owned connection). Never written by the router.
        SESSIONS: ("dynamodb:GetItem",),
        EVENTS: ("dynamodb:PutItem", "dynamodb:Query"),  # Query: a connection's history
    }
)

# The deaths Lambda (entrypoints/lambda_deaths, application/deaths.py): find a dead task's
# sessions (Scan), end each live one (GetItem, then a transaction of an Update + a Put of
# SessionEnded), list what they own (owner-index Query) to hint it. Nothing else.
DEATHS: Grants = MappingProxyType(
    {
        SESSIONS: ("dynamodb:GetItem", "dynamodb:Scan", "dynamodb:UpdateItem"),
        OWNER_INDEX: ("dynamodb:Query",),
        EVENTS: ("dynamodb:PutItem",),
    }
)

# `wsfleet status`, `history` and `messages` with --backend aws, run by people with their own
# credentials: read-only, but `messages` reads what the upstreams sent (grant it knowingly).
OPERATOR: Grants = MappingProxyType(
    {
        CONNECTIONS: ("dynamodb:GetItem", "dynamodb:Scan"),
        SESSIONS: ("dynamodb:GetItem", "dynamodb:Scan"),  # sessions and their load
        EVENTS: ("dynamodb:Query",),  # connection and session histories
        MESSAGES: ("dynamodb:Query",),  # `wsfleet messages`: the stored messages themselves
    }
)
