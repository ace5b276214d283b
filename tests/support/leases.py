"""A real, trusted Lease for tests of the parts that read one (the ingest writer): a
SessionKeeper whose session is opened on the context's store."""

from application.worker.context import WorkerContext
from application.worker.lease import Lease
from application.worker.session_keeper import SessionKeeper


async def trusted_lease(ctx: WorkerContext, connection_id: str, token: int = 1) -> Lease:
    keeper = SessionKeeper(ctx, lambda: 1)
    await keeper.open()
    return Lease(ctx, keeper, connection_id, token, keeper.session_id, keeper.fenced())
