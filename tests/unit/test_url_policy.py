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
    with pytest.raises(ForbiddenUrl, match="resolves to internal address"):
        await policy().check(f"wss://{host}/stream")


async def test_refusal_names_the_host_and_the_address() -> None:
    with pytest.raises(
        ForbiddenUrl, match=r"'metadata.example.com' resolves to .*169\.254\.169\.254"
    ):
        await policy().check("wss://metadata.example.com/")


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


async def test_unresolvable_host_is_refused() -> None:
    with pytest.raises(ForbiddenUrl, match=re.escape("'unknown.example.com' does not resolve")):
        await policy().check("wss://unknown.example.com/")


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
        await policy(".example.com").check("wss://metadata.example.com/")


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "metadata.example.com", "localhost"])
async def test_allow_private_lifts_the_address_check(host: str) -> None:
    await policy(allow_private=True).check(f"ws://{host}:8765/")


async def test_allow_private_does_not_lift_the_allow_list() -> None:
    with pytest.raises(
        ForbiddenUrl, match=re.escape("'127.0.0.1' is not in the allowed upstream hosts")
    ):
        await policy("feeds.example.com", allow_private=True).check("ws://127.0.0.1:8765/")
