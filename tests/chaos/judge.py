"""After a run: the invariants over everything that happened, from three independent records —
the simulator's subscribers (who was connected when), the store's ownership history (who was
granted which lease when) and the sink's rows (what was stored under which token).

- One active owner: two subscribers of one stream at once are allowed only while one of them
  belongs to a SIGSTOPped process, whose socket the kernel keeps open; that one must have
  closed within THAW_CLOSE_BOUND_S of SIGCONT. (So the simulator's `peak_subscribers` may be 2
  in a run with a freeze; the active peak, which excludes frozen processes, must be 1.)
- The history explains every subscriber: each was opened by a worker that had been granted the
  connection's latest lease (LeaseAcquired or LeaseTakenOver) before it connected.
- STOPPED means closed: no subscriber outlives a STOP by more than STOP_BOUND_S, none opens
  after it until the next START.
- The sink: every seq from 1 to the checkpoint exactly once with the upstream's content; every
  row written by the worker that held the lease of its token, and received before the next
  token was granted; after the final graceful shutdown nothing emitted before it is missing.
"""

from collections.abc import Sequence
from typing import Any

import attrs

from application.worker.session_keeper import worker_of
from domain import Event, LeaseAcquired, LeaseTakenOver
from entrypoints.devstack.judge import judge_stream
from entrypoints.simulator import is_message
from tests.chaos.harness import STOP_BOUND_S, THAW_CLOSE_BOUND_S, ChaosRun, Freeze, now_ms


@attrs.define
class Verdict:
    violations: list[str] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    checks: int = 0
    suspects: set[str] = attrs.Factory(set)

    def fail(self, cid: str, text: str) -> None:
        self.violations.append(f"{cid}: {text}")
        self.suspects.add(cid)


@attrs.frozen
class Grant:
    at_ms: int
    owner: str
    token: int


async def judge(run: ChaosRun, emitted_at_end: dict[str, int]) -> Verdict:
    verdict = Verdict()
    records = await run.records()
    names = run.by_worker_id()
    tolerance = run.clock_tolerance_ms()
    for cid in sorted(run.wanted):
        connections = records.get(cid, {}).get("connections", [])
        history = await run.backend.router.history(cid)
        grants = _grants(history)
        _one_active_owner(run, verdict, cid, connections)
        _history_explains_subscribers(run, verdict, cid, connections, grants, names, tolerance)
        _stopped_stays_closed(run, verdict, cid, connections)
        await _sink(run, verdict, cid, records.get(cid), grants, emitted_at_end.get(cid), tolerance)
    rewrites = await run.backend.rewrites()
    if rewrites:
        verdict.notes.append(f"seqs stored twice (same content, after a takeover): {rewrites}")
    return verdict


def _grants(history: Sequence[Event]) -> list[Grant]:
    return [
        Grant(e.at_ms, e.owner, e.token)
        for e in history
        if isinstance(e, LeaseAcquired | LeaseTakenOver)
    ]


def _interval(conn: dict[str, Any]) -> tuple[int, int]:
    end = conn["disconnected_at_ms"]
    return conn["connected_at_ms"], end if end is not None else now_ms()


def _one_active_owner(
    run: ChaosRun, verdict: Verdict, cid: str, connections: list[dict[str, Any]]
) -> None:
    ordered = sorted(connections, key=lambda c: c["connected_at_ms"])
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            verdict.checks += 1
            a_start, a_end = _interval(a)
            b_start = b["connected_at_ms"]
            if b_start >= a_end:
                continue
            start = max(a_start, b_start)
            if _frozen_then(run, a, start) or _frozen_then(run, b, start):
                continue
            verdict.fail(
                cid,
                f"two active subscribers at once from {start}: #{a['number']} "
                f"({run.owner_of(a) or '?'}) and #{b['number']} ({run.owner_of(b) or '?'})",
            )


def _frozen_then(run: ChaosRun, conn: dict[str, Any], at_ms: int) -> bool:
    """`conn` belonged to a process frozen at `at_ms` (or closing it at once after SIGCONT:
    it fences itself before doing anything else), and it closed within THAW_CLOSE_BOUND_S."""
    owner = run.owner_of(conn)
    bound = int(THAW_CLOSE_BOUND_S * 1000)
    freeze: Freeze
    for freeze in run.freezes:
        if freeze.worker != owner or not freeze.stopped_ms <= at_ms <= freeze.continued_ms + bound:
            continue
        end = conn["disconnected_at_ms"]
        return end is not None and end <= freeze.continued_ms + bound
    return False


def _history_explains_subscribers(
    run: ChaosRun,
    verdict: Verdict,
    cid: str,
    connections: list[dict[str, Any]],
    grants: list[Grant],
    names: dict[str, str],
    tolerance: int,
) -> None:
    unattributed = 0
    for conn in connections:
        verdict.checks += 1
        at = conn["connected_at_ms"]
        before = [g for g in grants if g.at_ms <= at + tolerance]
        owner = run.owner_of(conn)
        if owner is None:
            unattributed += 1
            if not before:
                verdict.fail(cid, f"subscriber #{conn['number']} at {at} before any lease")
            continue
        mine = [g for g in before if names.get(worker_of(g.owner)) == owner]
        if not mine:
            verdict.fail(cid, f"subscriber #{conn['number']} of {owner} at {at} without a lease")
            continue
        latest = mine[-1]
        passed_on = [g for g in grants if g.token > latest.token and g.at_ms < at - tolerance]
        if passed_on:
            taker = names.get(worker_of(passed_on[0].owner), passed_on[0].owner)
            verdict.fail(
                cid,
                f"subscriber #{conn['number']} of {owner} opened at {at} under token "
                f"{latest.token}, after token {passed_on[0].token} went to "
                f"{taker} at {passed_on[0].at_ms}",
            )
    if unattributed:
        verdict.notes.append(f"{cid}: {unattributed} subscribers too brief to attribute")


def _stopped_stays_closed(
    run: ChaosRun, verdict: Verdict, cid: str, connections: list[dict[str, Any]]
) -> None:
    bound = int(STOP_BOUND_S * 1000)
    for stopped in run.stop_times.get(cid, []):
        restarts = [t for t in run.start_times.get(cid, []) if t > stopped]
        until = restarts[0] if restarts else now_ms()
        for conn in connections:
            verdict.checks += 1
            start, end = _interval(conn)
            if start < stopped + bound and end > stopped + bound and start < until:
                if not _frozen_then(run, conn, stopped + bound):
                    late = (end - stopped) / 1000
                    verdict.fail(cid, f"subscriber #{conn['number']} open {late:.2f}s after STOP")
            elif stopped + bound <= start < until:
                verdict.fail(cid, f"subscriber #{conn['number']} opened at {start} while STOPPED")


async def _sink(
    run: ChaosRun,
    verdict: Verdict,
    cid: str,
    record: dict[str, Any] | None,
    grants: list[Grant],
    emitted: int | None,
    tolerance: int,
) -> None:
    conn = await run.backend.router.get(cid)
    rows = await run.backend.messages(cid)
    checkpoint = conn.checkpoint_seq if conn is not None else 0
    if run.backend.sink_keeps_copies:
        # A stream: every copy is read (the rows above are one per seq, by the reader's
        # rule), and only copies of what the upstream replayed since a checkpoint may be there.
        facts = judge_stream(cid, record, checkpoint, await run.backend.stored_seqs(cid))
        run.stats.duplicates += facts.duplicated
        run.stats.replayed += facts.redelivered
        if facts.copies_beyond_replay:
            verdict.fail(
                cid,
                f"{facts.duplicated} copies in the stream, {facts.copies_beyond_replay} more "
                f"than the {facts.redelivered} seqs the upstream sent again after a checkpoint",
            )
    else:
        facts = judge_stream(cid, None, checkpoint, [m.seq for m in rows])
        if facts.duplicated:
            verdict.fail(cid, "a seq is stored twice")
    verdict.checks += 4
    if facts.missing_below_checkpoint:
        missing = list(facts.missing_below_checkpoint[:20])
        verdict.fail(cid, f"gap below the checkpoint {checkpoint}: missing {missing}")
    if not facts.past_checkpoint_contiguous:
        beyond = list(facts.beyond_checkpoint)
        verdict.fail(cid, f"rows past the checkpoint {checkpoint} are not contiguous: {beyond}")
    wrong = [m.seq for m in rows if not is_message(m.data, cid, m.seq)]
    if wrong:
        verdict.fail(cid, f"rows whose content is not the upstream's: seqs {wrong[:10]}")
    by_token = {g.token: g for g in grants}
    for m in rows:
        verdict.checks += 1
        grant = by_token.get(m.token)
        if grant is None or grant.owner != m.worker_id:
            verdict.fail(
                cid,
                f"seq {m.seq} stored by {m.worker_id} under token {m.token}, "
                f"which was granted to {grant and grant.owner}",
            )
            continue
        successor = by_token.get(m.token + 1)
        if successor is not None and m.received_at_ms > successor.at_ms + tolerance:
            verdict.fail(
                cid,
                f"seq {m.seq} received under token {m.token} at {m.received_at_ms}, after token "
                f"{m.token + 1} was granted at {successor.at_ms} (a stale owner kept writing)",
            )
    if emitted is not None and conn is not None and run.start_times.get(cid):
        verdict.checks += 1
        # Everything emitted before the final shutdown reached the sink, give or take what was
        # still in flight (one flush interval at the stream's rate).
        if checkpoint < emitted - max(2, int(run.rate_of(cid) * 0.5)):
            verdict.fail(cid, f"checkpoint {checkpoint} behind {emitted} emitted before shutdown")


async def evidence(run: ChaosRun, connection_ids: set[str]) -> str:
    """What a reader needs to understand a violation: the fault timeline, the suspect
    connections' subscribers (with the worker each belonged to) and ownership histories, and
    the tail of every worker's log."""
    records = await run.records()
    lines = [f"backend {run.backend.name}, seed {run.seed}", "fault timeline (epoch ms):"]
    lines += [f"  {m.at_ms} {m.what} {m.detail}" for m in run.timeline]
    lines += [f"  {f.worker} frozen {f.stopped_ms}..{f.continued_ms}" for f in run.freezes]
    lines += [f"worker {w.name} = {w.worker_id}" for w in run.workers.values()]
    for cid in sorted(connection_ids)[:6]:
        record = records.get(cid, {})
        lines.append(
            f"--- {cid}: emitted {record.get('emitted')}, peak "
            f"{record.get('peak_subscribers')} subscribers ---"
        )
        for c in record.get("connections", []):
            lines.append(
                f"  subscriber #{c['number']} {run.owner_of(c) or '?'} from_seq={c['from_seq']} "
                f"{c['connected_at_ms']}..{c['disconnected_at_ms']} close={c['close_code']} "
                f"sent {c['first_seq']}..{c['last_seq']}"
            )
        for event in await run.backend.router.history(cid):
            fields = {k: v for k, v in attrs.asdict(event).items() if k != "connection_id"}
            lines.append(f"  {type(event).__name__} {fields}")
    for handle in run.workers.values():
        lines.append(handle.child.tail(12))
    return "\n".join(lines)
