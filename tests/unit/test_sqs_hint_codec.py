import json

import pytest

from adapters.sqs.messages import MalformedHint, decode, decode_all, decode_hint, encode_hint
from application.ports import HintOrigin


def test_encoded_hint_decodes_to_its_connection_id() -> None:
    assert decode_hint(encode_hint("meeting-42")) == "meeting-42"
    assert json.loads(encode_hint("meeting-42")) == {"connection_id": "meeting-42"}


def test_a_delayed_hint_says_so_and_only_a_true_flag_counts() -> None:
    assert json.loads(encode_hint("m-1", copy=True)) == {"connection_id": "m-1", "delayed": True}
    assert decode(encode_hint("m-1", copy=True)) == ("m-1", True)
    assert decode(encode_hint("m-1")) == ("m-1", False)
    assert decode('{"connection_id": "m-1", "delayed": "yes"}') == ("m-1", False)


def test_the_articles_pk_body_names_the_connection() -> None:
    assert decode_hint('{"pk": "CONN#meeting-42"}') == "meeting-42"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("", "not JSON"),
        ("meeting-42", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ("{}", "names no connection"),
        ('{"connection_id": 42}', "names no connection"),
        ('{"pk": "meeting-42"}', "names no connection"),
        ('{"connection_id": "has spaces"}', "invalid connection id"),
        ('{"pk": "CONN#"}', "invalid connection id"),
    ],
)
def test_malformed_bodies_say_why(body: str, problem: str) -> None:
    with pytest.raises(MalformedHint, match=problem):
        decode_hint(body)


def test_a_huge_malformed_body_is_not_echoed_in_full() -> None:
    with pytest.raises(MalformedHint) as caught:
        decode_hint("x" * 100_000)
    assert len(str(caught.value)) < 200


def test_a_released_connections_hint_names_its_releaser_and_an_invalid_one_is_refused() -> None:
    body = encode_hint("m-1", origin=HintOrigin("vm-1#2"))
    assert json.loads(body) == {"connection_id": "m-1", "from": "vm-1#2"}
    assert decode_all(body) == ("m-1", False, HintOrigin("vm-1#2"))
    assert decode_all(encode_hint("m-1")) == ("m-1", False, None)
    for bad in ('{"connection_id": "m-1", "from": 7}', '{"connection_id": "m-1", "from": ""}'):
        with pytest.raises(MalformedHint, match="'from'"):
            decode_all(bad)


def test_a_shutting_down_workers_hint_says_it_is_leaving_and_only_a_boolean_counts() -> None:
    body = encode_hint("m-1", origin=HintOrigin("vm-1#2", leaving=True))
    assert json.loads(body) == {"connection_id": "m-1", "from": "vm-1#2", "leaving": True}
    assert decode_all(body) == ("m-1", False, HintOrigin("vm-1#2", leaving=True))
    plain = '{"connection_id": "m-1", "from": "vm-1#2", "leaving": false}'
    assert decode_all(plain) == ("m-1", False, HintOrigin("vm-1#2"))
    with pytest.raises(MalformedHint, match="'leaving'"):
        decode_all('{"connection_id": "m-1", "from": "vm-1#2", "leaving": 1}')
    with pytest.raises(MalformedHint, match="who is leaving"):
        decode_all('{"connection_id": "m-1", "leaving": true}')


def test_a_balancing_hint_by_load_names_the_session_it_was_meant_for() -> None:
    body = encode_hint("m-1", origin=HintOrigin("vm-1#2", to="vm-3#1"))
    assert json.loads(body) == {"connection_id": "m-1", "from": "vm-1#2", "to": "vm-3#1"}
    assert decode_all(body) == ("m-1", False, HintOrigin("vm-1#2", to="vm-3#1"))
    with pytest.raises(MalformedHint, match="'to'"):
        decode_all('{"connection_id": "m-1", "from": "vm-1#2", "to": 7}')
    with pytest.raises(MalformedHint, match="who handed it off"):
        decode_all('{"connection_id": "m-1", "to": "vm-3#1"}')


def test_a_balancing_hint_by_load_says_its_connections_rate_and_a_wrong_one_is_malformed() -> None:
    origin = HintOrigin("vm-1#2", to="vm-3#1", rate=52.5)
    body = encode_hint("m-1", origin=origin)
    assert json.loads(body)["rate"] == 52.5
    assert decode_all(body) == ("m-1", False, origin)
    whole = '{"connection_id": "m-1", "from": "vm-1#2", "rate": 3}'
    assert decode_all(whole) == ("m-1", False, HintOrigin("vm-1#2", rate=3.0))
    for wrong in ('"fast"', "true", "-1", "NaN", "Infinity", "1e10"):
        with pytest.raises(MalformedHint, match="'rate'"):
            decode_all(f'{{"connection_id": "m-1", "from": "vm-1#2", "rate": {wrong}}}')
    with pytest.raises(MalformedHint, match="who handed it off"):
        decode_all('{"connection_id": "m-1", "rate": 2.0}')
