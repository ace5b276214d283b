"""The one rule for what a sink can store (application/ports/sink.py)."""

import pytest

from application.ports.sink import MAX_SEQ, StoredMessage, storable, utf8_size


def message(seq: int, data: str) -> StoredMessage:
    return StoredMessage("c1", seq, data, 0, "w1", 1, seq - 1)


def test_utf8_size_counts_bytes_not_characters() -> None:
    assert utf8_size("abc") == 3
    assert utf8_size("é") == 2
    assert utf8_size("€") == 3
    assert utf8_size("😀") == 4
    with pytest.raises(UnicodeEncodeError):
        utf8_size("\ud800")  # a lone surrogate cannot be stored as text


def test_storable_bounds_seq_and_bytes() -> None:
    assert storable(message(0, "ab"), 2)
    assert storable(message(MAX_SEQ, "ab"), 2)
    assert not storable(message(MAX_SEQ + 1, "ab"), 2)
    assert not storable(message(-1, "ab"), 2)
    assert not storable(message(1, "é"), 1)  # 1 character, 2 bytes


def test_storable_needs_a_prev_link_below_the_seq() -> None:
    def linked(seq: int, prev: int) -> StoredMessage:
        return StoredMessage("c1", seq, "ab", 0, "w1", 1, prev)

    assert storable(linked(0, -1), 2)  # nothing before seq 0
    assert storable(linked(9, 2), 2)  # an upstream gap
    assert not storable(linked(9, 9), 2)
    assert not storable(linked(9, 10), 2)
    assert not storable(linked(0, -2), 2)
