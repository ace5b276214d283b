"""UrlPolicy: workers open only URLs whose hosts are public (and allow-listed, when configured)."""

import re

import pytest

from application.url_policy import ForbiddenUrl, UrlPolicy
from domain import InvalidCommand
from tests.support.resolver import StaticResolver

PUBLIC = "93.184.216.34"

RESOLVER = StaticResolver(
    {
        "feeds.example.com": [PUBLIC, "2606:2800:220:1:248:1893:25c8:1946"],
        "a.b.example.com": [PUBLIC],
        "example.com": [PUBLIC],
        "badexample.com": [PUBLIC],
        "feeds.example.com.evil.net": [PUBLIC],
        "other.example.org": [PUBLIC],
        "rebound.example.com": [PUBLIC, "10.1.2.3"],  # one bad address is enough to refuse
        "metadata.example.com": ["169.254.169.254"],
        "nowhere.example.com": [],
        "localhost": ["127.0.0.1", "::1"],
    }
)


def policy(*allowed_hosts: str, allow_private: bool = False) -> UrlPolicy:
    return UrlPolicy(resolver=RESOLVER, allowed_hosts=allowed_hosts, allow_private=allow_private)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.8.9.10",
        "169.254.169.254",  # the instance metadata service
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",
        "224.0.0.1",
        "[::1]",
        "[::]",
        "[fe80::1]",
        "[fd00::1]",  # unique local
        "[ff02::1]",
        "[::ffff:127.0.0.1]",  # IPv4-mapped
        "[::ffff:169.254.169.254]",
        "[::ffff:10.0.0.1]",
        "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254 (DNS64 networks translate it)
        "[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
        "[2002:a9fe:a9fe::1]",  # 6to4 of 169.254.169.254
        "metadata.example.com",
        "rebound.example.com",
    ],
)
async def test_internal_addresses_are_refused(host: str) -> None:
    with pytest.raises(ForbiddenUrl, match=r"resolves to an? (internal|cloud metadata)"):
        await policy().check(f"wss://{host}/stream")


async def test_refusal_names_the_host_and_keeps_the_address_for_logs_only() -> None:
    """API callers see the message (400 body): it must not map the internal network."""
    with pytest.raises(ForbiddenUrl) as refused:
        await policy().check("wss://rebound.example.com/")

    assert "'rebound.example.com' resolves to an internal address" in str(refused.value)
    assert "10.1.2.3" not in str(refused.value)
    assert refused.value.detail == "'rebound.example.com' -> 10.1.2.3"


# 169.254.169.254 however it is written; the AWS IPv6 endpoint; the link-local ranges.
METADATA_SPELLINGS = [
    "169.254.169.254",
    "2852039166",  # decimal
    "0xa9fea9fe",  # hex
    "0xA9.0xFE.0xA9.0xFE",
    "0251.0376.0251.0376",  # octal
    "169.254.43518",  # a.b.c16 form, as inet_aton reads it
    "169.16689662",  # a.b24 form
    "[::ffff:169.254.169.254]",  # IPv4-mapped
    "[::ffff:a9fe:a9fe]",
    "[::169.254.169.254]",  # IPv4-compatible
    "[64:ff9b::a9fe:a9fe]",  # NAT64
    "[2002:a9fe:a9fe::1]",  # 6to4
    "[fd00:ec2::254]",  # AWS's IPv6 metadata endpoint
    "169.254.170.2",  # ECS task metadata and credentials
    "[fe80::1]",
    "metadata.example.com",
]


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
@pytest.mark.parametrize("allow_private", [False, True], ids=["default", "allow-private"])
async def test_metadata_addresses_are_refused_even_when_private_ones_are_allowed(
    host: str, allow_private: bool
) -> None:
    with pytest.raises(ForbiddenUrl, match="cloud metadata or link-local"):
        await policy(allow_private=allow_private).vet(f"ws://{host}/latest/meta-data/")


@pytest.mark.parametrize(
    ("host", "address"),
    [("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("017700000001", "127.0.0.1")],
)
async def test_numeric_spellings_are_read_as_the_address_they_name(host: str, address: str) -> None:
    """Not passed to the resolver as names: they are vetted, and connected to, as addresses."""
    resolver = StaticResolver({})

    vetted = await UrlPolicy(resolver=resolver, allow_private=True).vet(f"ws://{host}:8765/")

    assert vetted.addresses == (address,)
    assert resolver.asked == []


class Rebinding:
    """Answers a public address to the first question and 127.0.0.1 to every later one."""

    def __init__(self) -> None:
        self.asked = 0

    async def resolve(self, host: str) -> list[str]:
        self.asked += 1
        return [PUBLIC] if self.asked == 1 else ["127.0.0.1"]


async def test_vet_resolves_once_and_returns_the_addresses_it_checked() -> None:
    """The connector opens exactly these: the name is never resolved again for this connect.
    The next connect vets afresh, and then the internal answer is refused."""
    resolver = Rebinding()
    rebinding = UrlPolicy(resolver=resolver)

    vetted = await rebinding.vet("wss://rebind.example.com/s")

    assert (vetted.host, vetted.addresses, resolver.asked) == ("rebind.example.com", (PUBLIC,), 1)
    with pytest.raises(ForbiddenUrl, match="internal address"):
        await rebinding.vet("wss://rebind.example.com/s")


@pytest.mark.parametrize(
    "url",
    [
        "wss://feeds.example.com/stream",
        f"ws://{PUBLIC}:8080/",
        "wss://[2606:4700:4700::1111]/",
    ],
)
async def test_public_addresses_are_allowed(url: str) -> None:
    await policy().check(url)


async def test_unresolvable_host_is_refused_without_the_resolvers_text() -> None:
    with pytest.raises(ForbiddenUrl) as refused:
        await policy().check("wss://unknown.example.com/")

    assert str(refused.value) == "host 'unknown.example.com' does not resolve"
    assert "no such host" in refused.value.detail


async def test_host_resolving_to_no_address_is_refused() -> None:
    with pytest.raises(ForbiddenUrl, match=re.escape("'nowhere.example.com'")):
        await policy().check("wss://nowhere.example.com/")


async def test_non_websocket_url_is_an_invalid_command() -> None:
    with pytest.raises(InvalidCommand, match="ws:// or wss://"):
        await policy().check("https://feeds.example.com/")


@pytest.mark.parametrize(
    "url", ["wss://feeds.example.com/", "wss://FEEDS.Example.COM/", "wss://feeds.example.com./"]
)
async def test_allow_list_admits_the_exact_host_in_any_case(url: str) -> None:
    await policy("feeds.example.com").check(url)


@pytest.mark.parametrize(
    "host", ["other.example.org", "a.b.example.com", "feeds.example.com.evil.net", "example.com"]
)
async def test_allow_list_exact_entry_refuses_every_other_host(host: str) -> None:
    with pytest.raises(ForbiddenUrl, match=f"{host!r} is not in the allowed upstream hosts"):
        await policy("feeds.example.com").check(f"wss://{host}/")


@pytest.mark.parametrize("host", ["feeds.example.com", "a.b.example.com", "example.com"])
async def test_allow_list_suffix_entry_admits_the_domain_and_its_subdomains(host: str) -> None:
    await policy(".example.com").check(f"wss://{host}/")


@pytest.mark.parametrize("host", ["badexample.com", "feeds.example.com.evil.net"])
async def test_allow_list_suffix_entry_matches_whole_labels_only(host: str) -> None:
    with pytest.raises(ForbiddenUrl, match="not in the allowed upstream hosts"):
        await policy(".example.com").check(f"wss://{host}/")


async def test_allow_listed_host_resolving_to_an_internal_address_is_still_refused() -> None:
    """The allow-list narrows, never widens: DNS of an allowed name can still point inside."""
    with pytest.raises(ForbiddenUrl, match="internal address"):
        await policy(".example.com").check("wss://rebound.example.com/")


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "10.1.2.3", "[fd00::1]", "localhost"])
async def test_allow_private_lifts_the_address_check(host: str) -> None:
    await policy(allow_private=True).check(f"ws://{host}:8765/")


async def test_allow_private_does_not_lift_the_allow_list() -> None:
    with pytest.raises(
        ForbiddenUrl, match=re.escape("'127.0.0.1' is not in the allowed upstream hosts")
    ):
        await policy("feeds.example.com", allow_private=True).check("ws://127.0.0.1:8765/")
