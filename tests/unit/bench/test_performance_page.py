"""docs/performance.md is generated from bench/results: the committed page is what the
committed results make, and each section says how to reproduce it and what it measured."""

from __future__ import annotations

from bench.harness import REPO_ROOT, RESULTS_DIR
from bench.performance_page import load, machine_lines, page, provenance


def test_the_committed_page_is_the_one_its_committed_results_make() -> None:
    """Regenerate it with ``python -m bench.performance_page`` after a results file changes."""
    committed = (REPO_ROOT / "docs" / "performance.md").read_text()
    assert committed == page(load(RESULTS_DIR))


def test_a_section_names_its_command_commit_and_time() -> None:
    data = {"git_commit": "0123456789abcdef", "timestamp": "2026-01-01T00:00:00+00:00"}
    assert provenance(data, "make bench-e2e") == (
        "`make bench-e2e`; commit `0123456`, 2026-01-01T00:00:00+00:00."
    )
    assert provenance({**data, "dirty": True}, "x").startswith(
        "`x`; commit `0123456` with uncommitted changes,"
    )
    assert provenance({}, "x") == "`x`; commit not recorded, time not recorded."


def test_the_machine_is_the_newest_files_and_each_files_load_is_shown() -> None:
    machine = {"cpu_count": 2, "usable_cpus": 2, "memory_bytes": 2 << 30, "platform": "P",
               "python": "3.11", "load_average": [1.5, 1.0, 1.0]}  # fmt: skip
    results = {
        "old": {"timestamp": "2026-01-01", "machine": {**machine, "platform": "Q"}},
        "new": {"timestamp": "2026-02-01", "machine": {**machine, "cpu": "Xeon"}},
    }
    (line,) = machine_lines(results)
    assert line.startswith("Xeon, 2 cores (2 usable), 2.0 GiB, P; python 3.11.")
    assert "at each file's writing was new 1.5, old 1.5;" in line


def test_a_missing_results_file_says_which_command_makes_it() -> None:
    text = page({})
    assert "`bench/results/e2e.json` is missing: `make bench-e2e`." in text
    assert "## National-scale inputs" not in text and text.endswith("replayed family.\n")
