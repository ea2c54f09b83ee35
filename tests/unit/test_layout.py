"""The package's shape: no import cycles, no stage importing a later one, small modules."""

from __future__ import annotations

from pathlib import Path

from tests import layout


def test_no_import_cycles() -> None:
    assert layout.cycles(layout.modules()) == []


def test_no_stage_imports_a_later_one() -> None:
    assert layout.backward(layout.modules()) == []


def test_every_module_belongs_to_a_stage() -> None:
    assert layout.unplaced(layout.modules()) == []


def test_no_module_over_the_limit() -> None:
    big = {m.name: m.lines for m in layout.modules().values() if m.lines > layout.MAX_MODULE_LINES}
    assert big == {}


def test_the_checker_finds_a_cycle_and_a_backward_import(tmp_path: Path) -> None:
    """The checks above can fail: a two-module cycle and a spec -> job import are reported."""
    root = tmp_path / "das"
    for package in ("spec", "job"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "spec" / "a.py").write_text("from das.spec import b\nfrom das.job.run import go\n")
    (root / "spec" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from das.spec.a import x\n"
    )
    (root / "job" / "run.py").write_text("def go():\n    pass\n")
    found = layout.modules(root)
    assert layout.cycles(found) == [["das.spec.a", "das.spec.b"]]
    assert layout.backward(found) == [("das.spec.a", "das.job.run")]


def test_no_public_stage_reaches_the_input() -> None:
    """estimate/, solve/, postprocess/ and output/ import nothing that reads the input."""
    assert layout.reaches_input(layout.modules()) == []


def test_the_solver_library_needs_no_spark() -> None:
    assert layout.spark_in_solver(layout.modules()) == []


def test_the_privacy_rules_fail_when_broken(tmp_path: Path) -> None:
    """A post-processor module that reaches the input's reader through another stage, and
    a solver module that imports pyspark, are both reported."""
    root = tmp_path / "das"
    for package in ("input", "estimate", "postprocess", "solve", "confidential"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "input" / "read.py").write_text("FRAMES = 1\n")
    (root / "input" / "contract.py").write_text("UNIT_TYPES = 8\n")
    (root / "estimate" / "helper.py").write_text("from das.input.read import FRAMES\n")
    (root / "postprocess" / "levels.py").write_text(
        "from das.estimate.helper import FRAMES\nfrom das.input.contract import UNIT_TYPES\n"
    )
    (root / "postprocess" / "metrics.py").write_text("from das.confidential import tables\n")
    (root / "confidential" / "tables.py").write_text("")
    (root / "solve" / "rounding.py").write_text("from das.postprocess.levels import FRAMES\n")
    (root / "solve" / "spark.py").write_text("import pyspark.sql\n")
    found = layout.modules(root)
    assert layout.reaches_input(found) == [
        ("das.estimate.helper", "das.input.read"),
        ("das.postprocess.levels", "das.input.read"),
        ("das.postprocess.metrics", "das.confidential.tables"),
        ("das.solve.rounding", "das.input.read"),
    ]
    assert layout.spark_in_solver(found) == [("das.solve.spark", "das.solve.spark")]


def test_the_architecture_page_lists_every_module() -> None:
    """docs/architecture.md's package table names every module of das/ in its package's row."""
    page = (layout.DAS.parent / "docs" / "architecture.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`").rstrip("/"): line
        for line in page.splitlines()
        if line.startswith("| `")
    }
    missing = []
    for name in layout.modules():
        parts = name.split(".")[1:]
        if len(parts) < 2:
            continue  # a package, or errors.py (its own row)
        row = rows.get(parts[0], "")
        names = (f"`{parts[-1]}`", f"`{parts[-1]}/`", f"`{'/'.join(parts[1:])}`")
        if not any(n in row for n in names):
            missing.append(name)
    assert missing == []
