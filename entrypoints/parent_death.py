"""A child process the kernel kills if its parent dies first (Linux): no orphaned worker or
backing service keeps running unsupervised. Elsewhere the command is run as given.

The wrapper is a short Python program run by this interpreter: it asks for SIGKILL when the
parent dies (prctl PR_SET_PDEATHSIG = 1; it survives exec), checks the parent did not die
before that, then becomes the real command (same pid)."""

import os
import sys
from collections.abc import Sequence

_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)
# The same, first becoming another user (its primary group, no other): the interpreter is
# started as the caller (it may live where that user cannot read), and the kernel clears the
# parent-death request on a change of user, so the request is made after the change.
_AS_USER_THEN_DIE_WITH_PARENT = (
    "import ctypes, os, pwd, signal, sys\n"
    "user = pwd.getpwnam(sys.argv[2])\n"
    "os.setgroups([]); os.setgid(user.pw_gid); os.setuid(user.pw_uid)\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def dying_with_parent(argv: Sequence[str]) -> list[str]:
    """`argv`, on Linux wrapped so that it dies with this process."""
    if sys.platform != "linux":
        return list(argv)
    return [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv]


def as_user_dying_with_parent(argv: Sequence[str], user: str) -> list[str]:
    """`argv` run as `user` and dying with this process (Linux only: elsewhere the caller
    changes user itself, through subprocess's `user=`)."""
    assert sys.platform == "linux"
    return [sys.executable, "-c", _AS_USER_THEN_DIE_WITH_PARENT, str(os.getpid()), user, *argv]
