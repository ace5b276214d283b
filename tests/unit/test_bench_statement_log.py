"""The postgres store-cost suite counts what the server logged as executed, in its database
only (bench/store_cost_postgres.py)."""

from pathlib import Path

from bench.store_cost_postgres import StatementLog, kind

LOG = """\
db=storecost_a LOG:  statement: BEGIN;
db=storecost_a LOG:  execute __asyncpg_stmt_1__: SELECT * FROM sessions WHERE session_id = $1
\tFOR UPDATE
db=storecost_a DETAIL:  parameters: $1 = 's1'
db=storecost_a LOG:  execute __asyncpg_stmt_2__: UPDATE sessions SET version = $2
db=storecost_b LOG:  statement: BEGIN;
db=storecost_a LOG:  statement: COMMIT;
db=storecost_a LOG:  statement: SELECT pg_advisory_unlock_all();
\tCLOSE ALL;
db=storecost_a LOG:  execute <unnamed>:
\tWITH claimed AS (SELECT 1) SELECT * FROM claimed
db=[unknown] LOG:  connection received: host=127.0.0.1 port=5555
"""


def test_counts_each_executed_statement_of_its_database_by_kind(tmp_path: Path) -> None:
    path = tmp_path / "postgres.log"
    path.write_text("db=storecost_a LOG:  statement: BEGIN;\n")
    log = StatementLog(path, "storecost_a")
    log.mark()  # what was there before is not counted
    with path.open("a") as out:
        out.write(LOG)
    assert log.counted() == {
        "BEGIN;": 1,
        "SELECT": 1,
        "UPDATE": 1,
        "COMMIT;": 1,
        "pool reset": 1,
        "WITH": 1,
    }


def test_names_the_driver_s_reset_and_its_catalogue_reads() -> None:
    assert kind("SELECT pg_advisory_unlock_all();\nCLOSE ALL;") == "pool reset"
    assert kind("SELECT t.oid FROM pg_catalog.pg_type AS t") == "introspection"
    assert kind("  insert into messages VALUES ($1)") == "INSERT"
