"""DNS rebinding through the worker: each connect is made at the addresses the URL policy
vetted for that connect, never at what the name resolves to a moment later."""

from application.url_policy import UrlPolicy
from domain import DesiredState
from tests.support.fleet import Fleet

PUBLIC = "93.184.216.34"


class Rebinding:
    """A name whose first answer is public and every later one 127.0.0.1 (an attacker's DNS
    with a zero TTL)."""

    def __init__(self) -> None:
        self.answers: list[list[str]] = []

    async def resolve(self, host: str) -> list[str]:
        answer = [PUBLIC] if not self.answers else ["127.0.0.1"]
        self.answers.append(answer)
        return answer


async def test_a_name_that_rebinds_to_loopback_is_opened_only_at_the_address_vetted(
    fleet: Fleet,
) -> None:
    """GIVEN the default URL rules and a name answering public, then 127.0.0.1
    WHEN the worker connects, and the upstream drops it so that it reconnects
    THEN the first connect went to the public address it vetted, the reconnect was refused
    by the rule before any connect, and the connection rests in back-off."""
    resolver = Rebinding()
    fleet.url_policy = UrlPolicy(resolver=resolver)  # the workers'; the router keeps its own
    fleet.add_worker("a")
    url = await fleet.start("c1")
    stream = fleet.upstream.stream(url)
    stream.drop_after = 3

    await fleet.clock.run_until(lambda: len(resolver.answers) >= 2, 10)
    await fleet.clock.advance(1)

    assert stream.addresses == [(PUBLIC,)]  # one open, at the vetted address only
    state = await fleet.store.get("c1")
    assert state is not None
    assert state.desired_state is DesiredState.STARTED
    assert state.owner == ""  # given up with a back-off, not passed around
    assert (state.failures, state.not_before_ms > fleet.clock.now_ms()) == (1, True)
