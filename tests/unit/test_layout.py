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
