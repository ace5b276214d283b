"""`make mutants`: mutation testing (mutmut) over the modules where a bug loses data or breaks
ownership, with tests of the fast tiers (tests/unit, tests/contract, and a store adapter's
own tests in tests/integration) as the test command;
writes bench/MUTANTS.md (killed / survived / timeout per module, with the commit).

    python -m bench.mutants                      # every module in MODULES (hours on 2 cores)
    python -m bench.mutants domain adapters/dynamodb/conditions.py   # a subset
    python -m bench.mutants --max-children 1 domain

mutmut runs once per module, in a scratch copy (build/mutants/<module>/) with a [tool.mutmut]
section written from MODULES below, so the work tree is never rewritten and the selection
lives in one place. Each module's tests are the files that exercise it directly
(mutmut then runs, per mutant, those of them that cover the mutated function): a domain
mutant must be killed by the domain's own tests, not by a fleet test that happens to notice.
Its cache there makes a re-run retest only what changed. Results accumulate per module in
bench/mutants.json (a module not run keeps its last result, or shows as not run), and
bench/MUTANTS.md is rendered from it. A survivor is either killed by a new test or listed in
bench/mutants_judged.toml with a one-line reason (equivalent: why it cannot be observed; or
the test added since that kills it); every other survivor is reported as needing a test.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs

from entrypoints.devstack.aws import lend, local_aws, set_fake_credentials

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutants"
RESULTS = ROOT / "bench" / "mutants.json"
REPORT = ROOT / "bench" / "MUTANTS.md"
JUDGED = ROOT / "bench" / "mutants_judged.toml"
KEEP = "<!-- written by hand from here on; bench/mutants.py keeps it -->"

STORE_CONTRACT = ["tests/contract/test_store_contract.py"]
# The worker unit tier on virtual time, and the writer's fencing tests (same tier, named for
# the writer).
WORKER_UNIT = ["tests/unit/test_worker_*.py", "tests/unit/test_ingest_writer_fencing.py"]


@attrs.frozen
class Module:
    why: str
    tests: list[str]  # globs under the fast tiers
    # Its tests need the local AWS: the run starts one stack per mutant run at once and lends
    # them out (entrypoints/devstack/aws.py), saving a stack's start-up (~4 s) per mutant.
    aws: bool = False


# module (file, or package folder) -> why it is in scope, and its tests
MODULES: dict[str, Module] = {
    "domain": Module("decide/evolve: every ownership rule", ["tests/unit/test_domain_*.py"]),
    "adapters/dynamodb/conditions.py": Module(
        "the rules as DynamoDB conditions",
        [*STORE_CONTRACT, "tests/unit/test_dynamodb_conditions.py"],
        aws=True,
    ),
    # A store adapter also answers to its own tests: what the contract cannot say for every
    # store (a locked file, an old schema, DynamoDB's races and request shapes).
    "adapters/dynamodb/connection_store.py": Module(
        "DynamoDB store adapter",
        [
            *STORE_CONTRACT,
            "tests/integration/test_dynamodb_store.py",
            "tests/integration/test_dynamodb_races.py",
        ],
        aws=True,
    ),
    "adapters/sqlite/store.py": Module(
        "SQLite store adapter",
        [
            *STORE_CONTRACT,
            "tests/integration/test_sqlite_adapters.py",
            "tests/integration/test_sqlite_store_matches_memory.py",
        ],
    ),
    "adapters/memory/store.py": Module("in-memory store (the reference)", STORE_CONTRACT),
    "application/worker/session_keeper.py": Module(
        "the worker session: heartbeat, trust and self-fencing", WORKER_UNIT
    ),
    "application/worker/lease.py": Module(
        "one connection's lease, read from the session", WORKER_UNIT
    ),
    "application/worker/ingest.py": Module("the sink writer and checkpoints", WORKER_UNIT),
    "application/worker/session.py": Module("one owned connection", WORKER_UNIT),
    "application/worker/sessions.py": Module("taking and ending sessions", WORKER_UNIT),
}
SOURCE_PACKAGES = ["domain", "application", "adapters"]  # copied, mutated where selected
ALSO_COPY = ["entrypoints", "examples", "tests"]
STATUS = {  # mutmut's exit codes (mutmut.stats.status_by_exit_code), grouped for the report
    1: "killed",
    3: "killed",
    37: "killed",  # caught by the type check (none configured)
    0: "survived",
    33: "no tests",
    5: "no tests",
    36: "timeout",
    24: "timeout",
    -24: "timeout",
    152: "timeout",
    255: "timeout",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"a subset of: {', '.join(MODULES)}")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutants")
    parser.add_argument("--report-only", action="store_true", help="re-render MUTANTS.md")
    parser.add_argument(
        "--collect",
        action="store_true",
        help="take the verdicts as they stand in build/mutants/<module>/ (after retesting "
        "single mutants there by hand with `mutmut run NAME`), keeping the last run's time",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.modules) - set(MODULES))
    if unknown:
        parser.error(f"unknown modules {unknown}; choose from {list(MODULES)}")
    selected = args.modules or list(MODULES)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if not args.report_only:
        for module in selected:
            if args.collect:
                last = results.get(module, {})
                outcome = collect(module, last.get("seconds", 0), args.max_children)
            else:
                outcome = run(module, args.max_children)
            # Re-read: another run (of other modules) may have written meanwhile.
            results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
            results[module] = outcome
            RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    kept = REPORT.read_text().partition(KEEP)[2] if REPORT.exists() else ""
    REPORT.write_text(render(results) + "\n" + KEEP + kept)
    print(f"wrote {REPORT.relative_to(ROOT)}")
    survivors = [
        name
        for module in selected
        for name in results.get(module, {}).get("survivors", {})
        if name not in judged()
    ]
    return 1 if survivors else 0


def run(module: str, max_children: int) -> dict[str, Any]:
    work = work_dir(module)
    tests = prepare(work, module)
    print(f"mutmut over {module} with {len(tests)} test files; log in {work}/mutmut.log")
    cached = (work / "mutants").exists()
    began = time.monotonic()
    commit = commit_now()  # the tree copied above, not whatever HEAD is when the run ends
    with ExitStack() as stacks:
        env = {}
        if MODULES[module].aws:
            set_fake_credentials()
            running = [
                stacks.enter_context(local_aws(work / f"aws-{i}")) for i in range(max_children)
            ]
            env = lend(running, work)
        mutmut(work, module, max_children, [], env)
        if cached:
            # mutmut keeps a cached verdict unless the mutated function changed: survivors are
            # retested by name, so that a test added since kills them in this report. Not the
            # timeouts: each costs the whole CPU limit again, and a hang is already a detection.
            again = [
                k for k, v in read_exit_codes(work).items() if status(v) in ("survived", "no tests")
            ]
            if again:
                mutmut(work, module, max_children, again, env)
    took_s = time.monotonic() - began
    return collect(module, round(took_s), max_children, commit)


def collect(
    module: str, seconds: int, max_children: int, commit: str | None = None
) -> dict[str, Any]:
    work = work_dir(module)
    commit = commit or commit_now()
    mine = read_exit_codes(work)
    counts = Counter(status(v) for v in mine.values())
    print(f"  {module}: {dict(counts)} ({seconds} s)")
    return {
        "commit": commit,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), "
        f"{max_children} mutants at once",
        "tests": sorted(module_tests(module)),
        "counts": dict(counts),
        "total": len(mine),
        "seconds": seconds,
        "survivors": {k: status(v) for k, v in sorted(mine.items()) if status(v) != "killed"},
    }


def commit_now() -> str:
    """HEAD, -dirty only for changes that can change a verdict: not this script's own outputs
    (which every run before the first commit of its results leaves modified)."""
    outputs = [f":!{p.relative_to(ROOT)}" for p in (RESULTS, REPORT, JUDGED)]
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", *outputs)
    return git("rev-parse", "--short", "HEAD") + ("-dirty" if changed else "")


def work_dir(module: str) -> Path:
    return WORK / module.removesuffix(".py").replace("/", ".")


def module_tests(module: str) -> list[str]:
    return sorted(
        str(path.relative_to(ROOT)) for glob in MODULES[module].tests for path in ROOT.glob(glob)
    )


def status(exit_code: int | None) -> str:
    return "not run" if exit_code is None else STATUS.get(exit_code, "other")


def mutmut(
    work: Path, module: str, max_children: int, names: list[str], extra: dict[str, str]
) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **extra}
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)]
    with (work / "mutmut.log").open("a") as log:
        code = subprocess.call(
            [*command, *names], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    if code not in (0, 1):
        raise SystemExit(f"mutmut run over {module} failed ({code}): see {work}/mutmut.log")


def prepare(work: Path, module: str) -> list[str]:
    """A fresh copy of the sources and tests (keeping mutmut's cache in mutants/); returns the
    module's test files."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "mutmut.log").write_text("")
    for name in [*SOURCE_PACKAGES, *ALSO_COPY]:
        shutil.rmtree(work / name, ignore_errors=True)
        shutil.copytree(
            ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    tests = module_tests(module)
    only = f"{module}/*" if (ROOT / module).is_dir() else module
    pyproject = (ROOT / "pyproject.toml").read_text()
    pyproject += "\n[tool.mutmut]\n" + "\n".join(
        f"{key} = {json.dumps(value)}"
        for key, value in {
            "source_paths": SOURCE_PACKAGES,
            "only_mutate": [only],
            "also_copy": ALSO_COPY,
            "pytest_add_cli_args_test_selection": tests,
            "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q"],
        }.items()
    )
    (work / "pyproject.toml").write_text(pyproject + "\n")
    return tests


def read_exit_codes(work: Path) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in (work / "mutants").rglob("*.py.meta"):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def judged() -> dict[str, str]:
    if not JUDGED.exists():
        return {}
    return {k: str(v) for k, v in tomllib.loads(JUDGED.read_text()).items()}


def count_mutants(module: str) -> int | None:
    """How many mutants mutmut makes of a module (for the estimate of a full run); None if
    mutmut's internals moved (it is not a public API)."""
    try:
        from mutmut.mutation.file_mutation import mutate_file_contents

        path = ROOT / module
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        return sum(
            len(mutate_file_contents(str(f.relative_to(ROOT)), f.read_text()).mutant_names)
            for f in files
        )
    except Exception:
        return None


def render(results: dict[str, Any]) -> str:
    known = judged()
    lines = [
        "# Mutation testing (`make mutants`)",
        "",
        "mutmut over the modules where a bug loses data or breaks ownership. Each module's test",
        "command is the fast-tier files that exercise it directly, and for a store adapter its",
        "own integration tests (listed in `bench/mutants.py`;",
        "mutmut runs, per mutant, those that cover the mutated function). Generated by",
        "`bench/mutants.py` from `bench/mutants.json`;",
        "survivors judged by hand (equivalent, or killed by a test added since the run) are",
        "listed with the reason in `bench/mutants_judged.toml`. Not part of `make test`.",
        "",
        "| module | mutants | killed | survived | timeout | no tests | kill rate | commit | run |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    not_run = []
    rate_s: list[float] = []
    for module in MODULES:
        r = results.get(module)
        if r is None:
            not_run.append(module)
            continue
        c = r["counts"]
        tested = r["total"] - c.get("not run", 0)
        killed = c.get("killed", 0)
        rate = f"{100 * killed / tested:.1f}%" if tested else "-"
        lines.append(
            f"| `{module}` | {r['total']} | {killed} | {c.get('survived', 0)} | "
            f"{c.get('timeout', 0)} | {c.get('no tests', 0)} | {rate} | {r['commit']} | "
            f"{r['date']}, {r['seconds']} s |"
        )
        if r["total"]:
            rate_s.append(r["seconds"] / r["total"])
    lines += ["", "Machine: " + "; ".join(sorted({r["machine"] for r in results.values()}))]
    if not_run:
        lines += ["", "## Not run yet", ""]
        per = sum(rate_s) / len(rate_s) if rate_s else None
        for module in not_run:
            n = count_mutants(module)
            guess = f", about {n * per / 60:.0f} min at the measured rate" if n and per else ""
            count = f"{n} mutants" if n is not None else "mutants not counted"
            lines.append(f"- `{module}` ({MODULES[module].why}): {count}{guess}")
    lines += ["", "## Survivors", ""]
    any_left = False
    for module in MODULES:
        for name, status in results.get(module, {}).get("survivors", {}).items():
            any_left = True
            why = known.get(name, "NEEDS A TEST")
            lines.append(f"- `{name}` ({status}): {why}")
    if not any_left:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
