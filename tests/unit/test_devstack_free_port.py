"""entrypoints/devstack/service.free_port: the kernel may hand a port just closed out again;
free_port never gives one process the same port twice (two workers started together were
given one health port, and the chaos harness read one worker's id for both)."""

import socket
from typing import Any

import pytest

from entrypoints.devstack import service


class ReusingSocket(socket.socket):
    """A socket whose bind to port 0 gets the kernel's answers from a script: the same port
    twice, then another."""

    answers = [47001, 47001, 47002]

    def bind(self, address: Any) -> None:
        super().bind((address[0], 0))
        self._port = ReusingSocket.answers.pop(0)

    def getsockname(self) -> Any:
        return ("127.0.0.1", self._port)


def test_a_port_already_handed_out_is_never_handed_out_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(service, "_GIVEN", set())
    monkeypatch.setattr(socket, "socket", ReusingSocket)
    assert [service.free_port(), service.free_port()] == [47001, 47002]
