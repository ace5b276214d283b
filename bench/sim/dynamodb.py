"""DynamoDB's costs and limits, modelled at the store port: what each port operation would send
to DynamoDB (the requests of adapters/dynamodb, as counted in bench/RESULTS.md section 10), how
long each request takes, how many read and write units it consumes on which partition key, and
a throttle when a key is asked for more than DynamoDB serves.

`DynamoDbModel` holds the fleet-wide state (the per-key meters, the counts, the brown-out
knobs); `ModelledStore` is the decorator each caller gets (a worker, the router), a
`ConnectionStore` like adapters/faults/store.py's: it wraps `execute`, `execute_session` and the
queries, so the named operations meet the model through the commands they send.

The numbers, each sourced in docs/simulation.md:
- latency: a log-normal per request around DynamoDB Local's measured medians on the quiet
  2-core machine (bench/RESULTS.md section 17): GetItem 6.5 ms, TransactWriteItems of two puts
  p50 14.1 / p99 18.5 ms; the transaction's p99/p50 spread is used for every request, and the
  other single-item and index requests are taken to cost what GetItem does (assumption);
- limits: 1,000 WCU and 3,000 RCU a second per partition key (DynamoDB's documented per-
  partition maximum, which adaptive capacity cannot raise for one key), judged per virtual
  second; a request past them is throttled;
- retries: a throttled request is tried again as botocore's standard mode does (3 attempts in
  all, the default of WSFLEET_AWS_MAX_ATTEMPTS, after random x 2^retry s of back-off); the port
  raises StoreUnavailable when the last attempt is throttled too. A session renewal is tried
  once (the worker's heartbeat client): the session keeper retries it;
- units: items of 289 bytes (connections, section 2), 150 (sessions, the adapter's estimate),
  60 (a KEYS_ONLY index entry, assumption), 200 (an event, assumption); strongly consistent
  reads 1 unit per 4 KB, index reads 0.5; a transaction 2 units per KB per item, a condition
  check included; an index entry moved, added or removed 1 unit per KB each side.

Not modelled: transaction conflicts beyond what the domain refuses (the inner store runs one
command at a time), GSI lag (the inner store's indexes are exact), the burst capacity a key
accrues while idle, partition splits."""

import math
import random
import typing
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import attrs

from adapters.dynamodb.connection_queries import BATCH_GET_KEYS, DEAD_READS_AT_ONCE
from adapters.dynamodb.connection_store import HEARTBEAT_ATTEMPTS
from adapters.dynamodb.schema import DEFAULT_ORPHAN_SHARDS, all_orphan_shards, orphan_shard
from application.errors import StoreUnavailable
from application.ports import Clock, ConnectionStore
from application.ports.store import CommandResult, SessionResult
from bench.sim.store import IndexedMemoryStore
from domain import (
    NO_OWNER,
    Acquire,
    Checkpoint,
    Command,
    Connection,
    DomainError,
    EndSession,
    Event,
    NoteExpiry,
    OpenSession,
    RenewSession,
    SessionCommand,
    SessionEvent,
    Start,
    Stop,
    WorkerSession,
    decide,
)

_T = typing.TypeVar("_T")

CONNECTION_ITEM_B = 289
SESSION_ITEM_B = 150
KEY_ENTRY_B = 60
EVENT_ITEM_B = 200
READ_UNIT_B = 4096
WRITE_UNIT_B = 1024
QUERY_PAGE_B = 2**20  # a Query or Scan returns at most 1 MB per request


@attrs.frozen
class Limits:
    wcu_per_key_s: float = 1_000.0
    rcu_per_key_s: float = 3_000.0
    attempts: int = 3
    # A new on-demand table serves this much at once (AWS's documented initial throughput);
    # reported against the sessions table's Scan rate, not enforced.
    table_rcu_s: float = 12_000.0
    table_wcu_s: float = 4_000.0


@attrs.frozen
class Latency:
    """Medians in seconds; `sigma` the log-normal's, from the transaction's p99/p50."""

    single_s: float = 0.0065
    transaction_s: float = 0.0141
    sigma: float = math.log(18.5 / 14.1) / 2.326


class Request(typing.NamedTuple):
    """One request, or one item of a request (a tuple, not an attrs class: the model makes
    millions of them at 1,000 workers, and a frozen attrs instance costs three times as much
    to make)."""

    api: str
    table: str  # a table, or "table/index"
    key: str  # the partition key the units land on
    rcu: float = 0.0
    wcu: float = 0.0
    # Another item of the request before it (a transaction's, a BatchGetItem's): its units
    # land on its own key, but it is neither a request of its own nor time of its own.
    extra: bool = False
    # More items of this request, each on its own key of the same table with the same units,
    # each an `extra` one: a BatchGetItem's keys (one Request, not one per key).
    more: tuple[str, ...] = ()
    # Attempts botocore makes of it, if not `Limits.attempts`: a session renewal's, made through
    # the worker's heartbeat client (HEARTBEAT_ATTEMPTS), the session keeper retrying instead.
    attempts: int = 0

    @property
    def where(self) -> str:
        return f"{self.table}:{self.key}"


Stage = list[Request]  # requests sent side by side; stages one after the other


def bundle(items: Sequence[Request]) -> list[Request]:
    """The items of one request: the first carries the request, the rest only their units."""
    return [
        item if i == 0 else Request(item.api, item.table, item.key, item.rcu, item.wcu, True)
        for i, item in enumerate(items)
    ]


def _read_units(size_b: int, consistent: bool = True) -> float:
    units = max(1, math.ceil(size_b / READ_UNIT_B))
    return units if consistent else units / 2


def _write_units(size_b: int, factor: int = 1) -> float:
    return factor * max(1, math.ceil(size_b / WRITE_UNIT_B))


CONN = "connections"
EVENTS = "events"
SESSIONS = "sessions"
ORPHANS = "connections/orphans-by-shard"
OWNERS = "connections/connections-by-owner"
STOPS = "connections/stops-by-owner"
SCAN_KEY = "(table scan)"  # a Scan's units: the whole (small) table, not one key


class DynamoDbModel:
    """The fleet's one DynamoDB: per-key meters for the current virtual second, the counts,
    and the brown-out knobs (`latency_factor`, `throttle_rate`: the share of requests refused
    as throttled whatever their key)."""

    def __init__(
        self,
        inner: IndexedMemoryStore,
        clock: Clock,
        rng: random.Random,
        limits: Limits = Limits(),
        latency: Latency = Latency(),
        shards: int = DEFAULT_ORPHAN_SHARDS,
    ) -> None:
        self.inner = inner
        self.clock = clock
        self.rng = rng
        self.limits = limits
        self.latency = latency
        self.shards = shards
        self.latency_factor = 1.0
        self.throttle_rate = 0.0
        self._second = -1
        # (table, key) -> [rcu, wcu] in the current second
        self._used: dict[tuple[str, str], list[float]] = {}
        # (table, key) -> highest units/s (of its limit's kind), and highest share of its limit
        # in a second
        self.peak_key: dict[tuple[str, str], float] = {}
        self.peak_share: dict[tuple[str, str], float] = {}
        self.requests: Counter[str] = Counter()  # "api table"
        self._request_names: dict[tuple[str, str], str] = {}
        self.rcu: defaultdict[str, float] = defaultdict(float)  # by table/index
        self.wcu: defaultdict[str, float] = defaultdict(float)
        self.throttled: Counter[str] = Counter()  # attempts refused, by table
        self.throttled_keys: Counter[str] = Counter()
        self.failed_ops: Counter[str] = Counter()  # port calls that raised StoreUnavailable
        self.by_caller: Counter[str] = Counter()  # requests by who sent them
        # By port operation: requests sent, calls made, virtual seconds the calls waited.
        self.by_op: Counter[str] = Counter()
        self.op_calls: Counter[str] = Counter()
        self.op_s: defaultdict[str, float] = defaultdict(float)
        # virtual second -> [acquisitions granted, refused at their reads]; refusals by why
        self.acquire_refusals: Counter[str] = Counter()
        self.acquires: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
        # virtual second -> [requests, RCU, WCU, RCU of sessions Scans]
        self.per_second: defaultdict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])

    # -- meters ------------------------------------------------------------------------------

    def _tick(self) -> int:
        second = int(self.clock.monotonic())
        if second != self._second:
            self._close_second()
            self._second = second
        return second

    def _close_second(self) -> None:
        limits = self.limits
        for key, (rcu, wcu) in self._used.items():
            share = max(rcu / limits.rcu_per_key_s, wcu / limits.wcu_per_key_s)
            if share > self.peak_share.get(key, 0.0):
                self.peak_share[key] = share
                self.peak_key[key] = max(rcu, wcu)
        self._used = {}

    def finish(self) -> None:
        """Fold the current second into the peaks (call before reading them)."""
        self._close_second()

    def hottest(self, n: int = 5) -> list[tuple[str, float, float]]:
        """("table:key", units/s, share of its limit) of the `n` keys nearest their limit."""
        top = sorted(self.peak_share.items(), key=lambda kv: kv[1], reverse=True)[:n]
        return [(f"{table}:{key}", self.peak_key[table, key], share) for (table, key), share in top]

    def _admit(self, table: str, key: str, rcu: float, wcu: float) -> bool:
        """Charge the units on `key` now, or refuse them (throttled: nothing consumed)."""
        if self.throttle_rate and self.rng.random() < self.throttle_rate:
            return False
        if key == SCAN_KEY:
            return True  # no one key's limit: reported per table (Limits.table_rcu_s)
        where = (table, key)
        used = self._used.get(where)
        if used is None:
            used = self._used[where] = [0.0, 0.0]
        if used[0] + rcu > self.limits.rcu_per_key_s or used[1] + wcu > self.limits.wcu_per_key_s:
            return False
        used[0] += rcu
        used[1] += wcu
        return True

    def _latency(self, request: Request) -> float:
        median = (
            self.latency.transaction_s
            if request.api == "TransactWriteItems"
            else self.latency.single_s
        )
        return median * math.exp(self.rng.gauss(0.0, self.latency.sigma)) * self.latency_factor

    async def send(self, caller: str, op: str, stages: Sequence[Stage]) -> None:
        """Spend the stages' virtual time and units; raise StoreUnavailable if a request stays
        throttled through every attempt (after the time its attempts took)."""
        second = self._tick()
        total_s = 0.0
        self.op_calls[op] += 1
        for stage in stages:
            slowest, exhausted = 0.0, False
            for request in stage:
                spent, ok = self._attempts(request, request.key, request.extra, second, caller, op)
                slowest = max(slowest, spent)
                exhausted = exhausted or not ok
                for key in self._served(request, second):  # a batch's other items
                    spent, ok = self._attempts(request, key, True, second, caller, op)
                    slowest = max(slowest, spent)
                    exhausted = exhausted or not ok
            total_s += slowest
            if exhausted:
                self.op_s[op] += total_s
                await self.clock.sleep(total_s)
                self.failed_ops[op] += 1
                raise StoreUnavailable(f"modelled DynamoDB throttled {op}")
        self.op_s[op] += total_s
        await self.clock.sleep(total_s)

    def _served(self, request: Request, second: int) -> list[str]:
        """A batch's other items (`Request.more`) as `_attempts` serves them, each an `extra`
        item on its own key, in one pass for the many that are under their key's limit with no
        brown-out (a survivor's orphan scan reads every dead connection: 22 million items an
        AZ loss at 1,000 workers). Returns the keys that are not so, in order, for `_attempts`
        to try (throttled, with its back-off): the same counts, units and random draws."""
        if self.throttle_rate or not request.more:
            return list(request.more)
        table, rcu, wcu = request.table, request.rcu, request.wcu
        rcu_limit, wcu_limit = self.limits.rcu_per_key_s, self.limits.wcu_per_key_s
        used_by_key = self._used
        left: list[str] = []
        served = 0
        for key in request.more:
            if left or key == SCAN_KEY:
                left.append(key)  # after one that is not: in order, as _attempts would
                continue
            where = (table, key)
            used = used_by_key.get(where)
            if used is None:
                used = used_by_key[where] = [0.0, 0.0]
            if used[0] + rcu > rcu_limit or used[1] + wcu > wcu_limit:
                left.append(key)
                continue
            used[0] += rcu
            used[1] += wcu
            served += 1
        if served:
            row = self.per_second[second]
            for _ in range(served):  # added one by one, as each item adds its own
                self.rcu[table] += rcu
                self.wcu[table] += wcu
                row[1] += rcu
                row[2] += wcu
        return left

    def _attempts(
        self, request: Request, key: str, extra: bool, second: int, caller: str, op: str
    ) -> tuple[float, bool]:
        """One item of a request on `key`, tried up to `Limits.attempts` times: (the virtual
        seconds its tries took, whether it was served)."""
        spent = 0.0
        table, rcu, wcu = request.table, request.rcu, request.wcu
        attempts = request.attempts or self.limits.attempts
        for attempt in range(attempts):
            row = self.per_second[second]
            if not extra:
                spent += self._latency(request)
                name = self._request_names.get((request.api, table))
                if name is None:
                    name = self._request_names[request.api, table] = f"{request.api} {table}"
                self.requests[name] += 1
                self.by_caller[caller] += 1
                self.by_op[op] += 1
                row[0] += 1
            if self._admit(table, key, rcu, wcu):
                self.rcu[table] += rcu
                self.wcu[table] += wcu
                row[1] += rcu
                row[2] += wcu
                if key == SCAN_KEY and table == SESSIONS:
                    row[3] += rcu
                return spent, True
            self.throttled[table] += 1
            self.throttled_keys[f"{table}:{key}"] += 1
            if attempt + 1 < attempts:
                spent += self.rng.random() * 2**attempt
        return spent, False

    # -- what each port operation sends ------------------------------------------------------

    def session_scan(self) -> Request:
        size = SESSION_ITEM_B * max(1, len(self.inner.session_ids()))
        return Request("Scan", SESSIONS, SCAN_KEY, rcu=_read_units(size))

    def scan_stage(self) -> Stage:
        pages = max(1, math.ceil(SESSION_ITEM_B * len(self.inner.session_ids()) / QUERY_PAGE_B))
        scan = self.session_scan()
        return [scan._replace(rcu=scan.rcu / pages) for _ in range(pages)]

    def shard_queries(self, unowned: Sequence[str]) -> Stage:
        per_shard: Counter[str] = Counter(orphan_shard(cid, self.shards) for cid in unowned)
        return [
            Request(
                "Query",
                ORPHANS,
                shard,
                rcu=_read_units(CONNECTION_ITEM_B * per_shard[shard], consistent=False),
            )
            for shard in all_orphan_shards(self.shards)
        ]

    def command_stages(self, command: Command, now_ms: int) -> list[Stage]:
        """GetItem(s) first (the adapter reads to decide), then the write if the domain would
        grant it: a refusal the reads show is never sent (adapters/dynamodb)."""
        inner = self.inner
        cid = command.connection_id
        state = inner._states.get(cid)
        conn_read = Request("GetItem", CONN, cid, rcu=_read_units(CONNECTION_ITEM_B))
        if isinstance(command, Checkpoint):  # a conditional UpdateItem, no read
            return [[Request("UpdateItem", CONN, cid, wcu=_write_units(CONNECTION_ITEM_B))]]
        reads = [conn_read]
        owner = state.owner if state is not None else NO_OWNER
        if isinstance(command, Acquire):
            reads.append(Request("GetItem", SESSIONS, command.session_id, rcu=1.0))
            if owner != NO_OWNER:
                reads.append(Request("GetItem", SESSIONS, owner, rcu=1.0))
        refused = "no change"
        try:
            granted = bool(decide(state, command, now_ms, inner._sessions))
        except DomainError as exc:
            granted, refused = False, type(exc).__name__
        if isinstance(command, Acquire):
            self.acquires[int(self.clock.monotonic())][0 if granted else 1] += 1
            if not granted:
                mine = owner == command.session_id
                self.acquire_refusals["held by the asker" if mine else refused] += 1
        if not granted:
            return [reads]
        tx = "TransactWriteItems"
        writes = [
            Request(tx, CONN, cid, wcu=_write_units(CONNECTION_ITEM_B, 2)),
            Request(tx, EVENTS, cid, wcu=_write_units(EVENT_ITEM_B, 2)),
        ]
        shard = orphan_shard(cid, self.shards)
        if isinstance(command, Acquire):
            writes.append(Request(tx, SESSIONS, command.session_id, wcu=_write_units(1, 2)))
            writes.append(Request(tx, OWNERS, command.session_id, wcu=1.0))
            if owner != NO_OWNER:
                writes.append(Request(tx, SESSIONS, owner, wcu=_write_units(1, 2)))
                writes.append(Request(tx, OWNERS, owner, wcu=1.0))
            else:
                writes.append(Request(tx, ORPHANS, shard, wcu=1.0))
        elif isinstance(command, Start):
            writes.append(Request(tx, ORPHANS, shard, wcu=1.0))
        elif isinstance(command, Stop):
            if owner != NO_OWNER:
                writes.append(Request(tx, STOPS, owner, wcu=1.0))
            else:
                writes.append(Request(tx, ORPHANS, shard, wcu=1.0))
        else:  # Release, EndStream, ReportUpstreamFailure: off the owner's index
            writes.append(Request(tx, OWNERS, owner, wcu=1.0))
            writes.append(Request(tx, ORPHANS, shard, wcu=1.0))
        return [reads, bundle(writes)]

    def session_stages(self, command: SessionCommand) -> list[Stage]:
        sid = command.session_id
        if isinstance(command, RenewSession):
            return [[Request("UpdateItem", SESSIONS, sid, wcu=1.0, attempts=HEARTBEAT_ATTEMPTS)]]
        tx = "TransactWriteItems"
        writes = bundle(
            [
                Request(tx, SESSIONS, sid, wcu=_write_units(SESSION_ITEM_B, 2)),
                Request(tx, EVENTS, f"SESSION#{sid}", wcu=_write_units(EVENT_ITEM_B, 2)),
            ]
        )
        read = [Request("GetItem", SESSIONS, sid, rcu=1.0)]
        if isinstance(command, NoteExpiry):
            # Every worker that sees the death asks; after the first, the read finds it noted.
            known = self.inner._sessions.get(sid)
            noted = known is None or known.expiry_noted or known.ended_reason is not None
            return [read] if noted else [read, writes]
        if isinstance(command, EndSession):
            return [read, writes]
        assert isinstance(command, OpenSession)
        return [writes]

    def orphan_stages(self, now_ms: int, page_size: int) -> list[Stage]:
        """The sessions Scan; the dead sessions that own any, DEAD_READS_AT_ONCE at a time: their
        owner-index Queries side by side, then the BatchGetItems of what they list, as many at
        once; the shard Queries side by side (adapters/dynamodb/connection_queries.py)."""
        stages = [self.scan_stage()]
        unowned, _ = self.inner.orphan_candidates(now_ms)
        dead: list[tuple[str, list[str]]] = []
        for sid, owned in self.inner.by_owner.items():
            if not owned:
                continue
            session = self.inner._sessions.get(sid)
            if session is not None and session.is_live(now_ms):
                continue
            dead.append((sid, list(owned)))
        at_once = DEAD_READS_AT_ONCE
        read = _read_units(CONNECTION_ITEM_B)
        for first in range(0, len(dead), at_once):
            group = dead[first : first + at_once]
            stages.append([self.owner_query(sid, len(owned)) for sid, owned in group])
            ids = [cid for _, owned in group for cid in owned]
            step = min(page_size, BATCH_GET_KEYS)
            gets = [
                Request("BatchGetItem", CONN, ids[i], rcu=read, more=tuple(ids[i + 1 : i + step]))
                for i in range(0, len(ids), step)
            ]
            stages += [gets[i : i + at_once] for i in range(0, len(gets), at_once)]
        stages.append(self.shard_queries(unowned))
        return stages

    def owner_query(self, session_id: str, entries: int, index: str = OWNERS) -> Request:
        return Request(
            "Query", index, session_id, rcu=_read_units(KEY_ENTRY_B * entries, consistent=False)
        )


class ModelledStore(ConnectionStore):
    """One caller's way to the modelled DynamoDB (see the module docstring)."""

    def __init__(self, model: DynamoDbModel, caller: str) -> None:
        self._model = model
        self._inner = model.inner
        self._caller = caller

    async def _call(
        self, op: str, stages: Sequence[Stage], call: Callable[[], Awaitable[_T]]
    ) -> _T:
        await self._model.send(self._caller, op, stages)
        return await call()

    async def execute(self, command: Command, now_ms: int) -> CommandResult:
        stages = self._model.command_stages(command, now_ms)
        return await self._call(
            type(command).__name__, stages, lambda: self._inner.execute(command, now_ms)
        )

    async def execute_session(self, command: SessionCommand, now_ms: int) -> SessionResult:
        stages = self._model.session_stages(command)
        return await self._call(
            type(command).__name__, stages, lambda: self._inner.execute_session(command, now_ms)
        )

    async def get(self, connection_id: str) -> Connection | None:
        read = Request("GetItem", CONN, connection_id, rcu=1.0)
        return await self._call("get", [[read]], lambda: self._inner.get(connection_id))

    async def get_session(self, session_id: str) -> WorkerSession | None:
        read = Request("GetItem", SESSIONS, session_id, rcu=1.0)
        return await self._call(
            "get_session", [[read]], lambda: self._inner.get_session(session_id)
        )

    async def list_sessions(self) -> Sequence[WorkerSession]:
        return await self._call(
            "list_sessions", [self._model.scan_stage()], self._inner.list_sessions
        )

    async def iter_orphans(
        self, now_ms: int, page_size: int
    ) -> AsyncIterator[Sequence[Connection]]:
        stages = self._model.orphan_stages(now_ms, page_size)
        pages = await self._call("iter_orphans", stages, lambda: self._pages(now_ms, page_size))
        for page in pages:
            yield page

    async def _pages(self, now_ms: int, page_size: int) -> list[Sequence[Connection]]:
        return [page async for page in self._inner.iter_orphans(now_ms, page_size)]

    async def next_available_at(self, now_ms: int) -> int | None:
        # The sessions Scan, then the first entry of each shard (sorted by back-off end).
        stages = [self._model.scan_stage(), self._model.shard_queries(())]
        return await self._call(
            "next_available_at", stages, lambda: self._inner.next_available_at(now_ms)
        )

    async def stop_requested(self, session_id: str) -> Sequence[str]:
        stops = await self._inner.stop_requested(session_id)
        query = self._model.owner_query(session_id, len(stops), STOPS)
        return await self._call("stop_requested", [[query]], lambda: _value(stops))

    async def owned_by(self, session_id: str) -> Sequence[str]:
        owned = await self._inner.owned_by(session_id)
        query = self._model.owner_query(session_id, len(owned))
        return await self._call("owned_by", [[query]], lambda: _value(owned))

    async def forget_session(self, session_id: str, now_ms: int) -> bool:
        stages = [
            [self._model.owner_query(session_id, 0)],
            [Request("DeleteItem", SESSIONS, session_id, wcu=1.0)],
        ]
        return await self._call(
            "forget_session", stages, lambda: self._inner.forget_session(session_id, now_ms)
        )

    async def history(self, connection_id: str) -> Sequence[Event]:
        query = Request("Query", EVENTS, connection_id, rcu=1.0)
        return await self._call("history", [[query]], lambda: self._inner.history(connection_id))

    async def session_history(self, session_id: str) -> Sequence[SessionEvent]:
        query = Request("Query", EVENTS, f"SESSION#{session_id}", rcu=1.0)
        return await self._call(
            "session_history", [[query]], lambda: self._inner.session_history(session_id)
        )

    async def list_connections(self, limit: int = 1000) -> Sequence[Connection]:
        scan = Request("Scan", CONN, SCAN_KEY, rcu=_read_units(CONNECTION_ITEM_B * limit))
        return await self._call(
            "list_connections", [[scan]], lambda: self._inner.list_connections(limit)
        )


async def _value(value: _T) -> _T:
    return value
