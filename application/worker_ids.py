"""The worker id, made and read in one place: a base name (an ECS task id, a host name, a
chosen name, made safe) plus "-" and 8 random hex digits, unique per process incarnation, so
a restarted worker never impersonates its previous self. The deaths use case finds an ECS
task's sessions by that base (`made_from`)."""

import re
import secrets

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SUFFIX = re.compile(r"-[0-9a-f]{8}")


def worker_id_for(name: str) -> str:
    """`name` (made safe) plus a random suffix: unique per process incarnation."""
    base = _UNSAFE.sub("-", name).strip("-")[:64] or "worker"
    return f"{base}-{secrets.token_hex(4)}"


def name_of(worker_id: str) -> str:
    """`w2-1a2b3c4d` -> `w2`: the name a worker id was made from (undoes `worker_id_for`)."""
    return worker_id.rsplit("-", 1)[0]


def made_from(worker_id: str, base: str) -> bool:
    """Whether `worker_id` was made by `worker_id_for` from `base` (an ECS task id)."""
    return worker_id.startswith(base) and bool(_SUFFIX.fullmatch(worker_id[len(base) :]))
