"""The one rule for what a sink can store (application/ports/sink.py)."""

import pytest

from application.ports.sink import MAX_SEQ, StoredMessage, storable, utf8_size


def message(seq: int, data: str) -> StoredMessage:
    return StoredMessage("c1", seq, data, 0, "w1", 1)


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
