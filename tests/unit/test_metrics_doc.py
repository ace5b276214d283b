"""docs/metrics.md is the catalogue (application/ports/metrics.py), generated: a metric added,
renamed or re-described there without regenerating the file fails here."""

from pathlib import Path

from adapters.prometheus import prometheus_name
from application.ports.metrics import CATALOGUE
from entrypoints.metrics_doc import render

DOCS = Path(__file__).parents[2] / "docs" / "metrics.md"


def test_docs_metrics_md_is_generated_from_the_catalogue() -> None:
    assert DOCS.read_text() == render(), (
        "docs/metrics.md is stale: run `.venv/bin/python -m entrypoints.metrics_doc > "
        "docs/metrics.md`"
    )


def test_every_catalogue_metric_has_a_row_with_both_names_and_its_meaning() -> None:
    rows = [line for line in DOCS.read_text().splitlines() if line.startswith("| `")]
    assert len(rows) == len(CATALOGUE)
    for spec, row in zip(CATALOGUE, rows, strict=True):
        assert row.startswith(f"| `{spec.name}` | `{prometheus_name(spec)}` |"), row
        assert spec.help in row
