#!/usr/bin/env python3
"""Build the router's Lambda package (`make lambda-zip` -> build/lambda-router.zip).

What goes in, decided from the code rather than by hand:
- wsfleet's own modules: the static import closure of the handler's module (read with `ast`,
  nothing is imported), so a module the router never imports is not shipped;
- third-party distributions: the ones those modules import at run time (imports under
  `if TYPE_CHECKING:` are typing-only and skipped), pinned to the versions installed here (the
  ones the tests ran against), installed by pip for the Lambda platform (manylinux wheels
  only, never a local build) together with their own dependencies.
The Lambda runtime's boto3/botocore are not relied on: aiobotocore pins its own botocore.

The zip is reproducible (sorted entries, fixed timestamps and modes), so its hash (Terraform's
`source_code_hash`) changes only when its content does.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("domain", "application", "adapters", "entrypoints")
HANDLER_MODULE = "entrypoints.lambda_router.handler"
# Every handler the package serves: the router, and the deaths Lambda (infra/deaths.tf).
HANDLER_MODULES = (HANDLER_MODULE, "entrypoints.lambda_deaths.handler")
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024  # Lambda's limit for a function and its layers
DIRECT_UPLOAD_LIMIT = 50 * 1024 * 1024  # larger zips must go through S3
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_SKIPPED_PARTS = frozenset({"__pycache__", "bin"})


def module_path(name: str, root: Path = ROOT) -> Path | None:
    """The source file of a first-party module (a package's __init__.py), or None."""
    base = root.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except the bodies of `if TYPE_CHECKING:` (typing-only imports)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (n for child in node.orelse for n in (child, *_runtime_nodes(child)))
            continue
        yield node
        yield from _runtime_nodes(node)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path) -> set[str]:
    """Absolute names of the modules `name` imports at run time (`from a import b` yields both
    `a` and `a.b`: b may be a submodule; names that are not modules are dropped later)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        # A package whose re-exports load when first used (adapters/lazy.py: `__getattr__ =
        # exports(__name__, {"Name": "submodule", ...})`) imports each of those submodules.
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "exports"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Dict)
        ):
            found.update(
                f"{package}.{value.value}"
                for value in node.args[1].values
                if isinstance(value, ast.Constant) and isinstance(value.value, str)
            )
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            if source == "__future__":
                continue
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


def closure(entry: str, root: Path = ROOT) -> tuple[set[str], set[str]]:
    """(first-party modules, top-level names of everything else) reachable from `entry`."""
    modules: set[str] = set()
    external: set[str] = set()
    pending = [entry]
    while pending:
        name = pending.pop()
        top = name.partition(".")[0]
        if top not in FIRST_PARTY:
            external.add(top)
            continue
        path = module_path(name, root)
        if path is None or name in modules:
            continue  # an attribute imported with `from module import attribute`
        modules.add(name)
        # Importing a.b.c runs a/__init__.py and a/b/__init__.py first.
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        pending.extend([*parents, *imports_of(name, path)])
    return modules, external - set(sys.stdlib_module_names) - {""}


def requirements(top_level_names: Iterable[str]) -> list[str]:
    """Pinned requirements (`name==installed version`) of the distributions providing these
    import names. Raises SystemExit for an import no installed distribution provides."""
    providers = importlib.metadata.packages_distributions()
    pins = set()
    for top in sorted(top_level_names):
        if top not in providers:
            raise SystemExit(f"no installed distribution provides {top!r}: install the project")
        for dist in providers[top]:
            pins.add(f"{dist}=={importlib.metadata.version(dist)}")
    return sorted(pins, key=str.lower)


def pip_install(pins: list[str], target: Path, platform: str, python_version: str) -> None:
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
        "--target", str(target),
        "--platform", platform,
        "--implementation", "cp",
        "--python-version", python_version,
        "--only-binary=:all:",
        *pins,
    ]  # fmt: skip
    subprocess.run(command, check=True)


def package_files(modules: Iterable[str], deps: Path | None, root: Path = ROOT) -> dict[str, Path]:
    """Archive name -> file, for wsfleet's modules and the installed dependencies."""
    files: dict[str, Path] = {}
    for name in modules:
        path = module_path(name, root)
        assert path is not None
        files[path.relative_to(root).as_posix()] = path
    if deps is not None:
        for path in deps.rglob("*"):
            relative = path.relative_to(deps)
            if path.is_file() and not _SKIPPED_PARTS.intersection(relative.parts):
                files.setdefault(relative.as_posix(), path)
    return files


def write_zip(files: dict[str, Path], output: Path) -> int:
    """Write a reproducible zip; return the unzipped size in bytes."""
    output.parent.mkdir(parents=True, exist_ok=True)
    total = 0
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            data = files[name].read_bytes()
            total += len(data)
            archive.writestr(info, data)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "build" / "lambda-router.zip")
    parser.add_argument(
        "--handler-module",
        action="append",
        help=f"a handler module to package (repeatable) [{', '.join(HANDLER_MODULES)}]",
    )
    parser.add_argument("--platform", default="manylinux2014_x86_64", help="arm64: ..._aarch64")
    parser.add_argument("--python-version", default="3.11", help="of the Lambda runtime")
    parser.add_argument(
        "--list", action="store_true", help="print the modules and requirements; build nothing"
    )
    args = parser.parse_args(argv)
    if not re.fullmatch(r"\d\.\d+", args.python_version):
        parser.error("--python-version: like 3.11")

    modules, external = set(), set()
    for handler_module in args.handler_module or HANDLER_MODULES:
        found, needs = closure(handler_module)
        if handler_module not in found:
            parser.error(f"{handler_module} is not a module of this project")
        modules |= found
        external |= needs
    pins = requirements(external)
    if args.list:
        print("\n".join(sorted(modules)))
        print("\n".join(pins))
        return 0

    with tempfile.TemporaryDirectory(prefix="wsfleet-lambda-") as scratch:
        deps = Path(scratch) / "deps"
        pip_install(pins, deps, args.platform, args.python_version)
        size = write_zip(package_files(modules, deps), args.output)
        shutil.rmtree(deps)
    zipped = args.output.stat().st_size
    print(
        f"{args.output}: {len(modules)} wsfleet modules, {len(pins)} pinned distributions "
        f"(+ their dependencies); {zipped / 2**20:.1f} MiB zipped, {size / 2**20:.1f} MiB unzipped"
    )
    if size > LAMBDA_UNZIPPED_LIMIT:
        print("error: larger than Lambda's 250 MB unzipped limit", file=sys.stderr)
        return 1
    if zipped > DIRECT_UPLOAD_LIMIT:
        print(
            "warning: over 50 MB zipped: upload it through S3 (s3_bucket/s3_key)", file=sys.stderr
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
