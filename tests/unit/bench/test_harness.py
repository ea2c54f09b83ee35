"""The benchmark harness: the child-process protocol, the results file, spreads; and that
``make bench`` runs every benchmark there is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.harness import BENCH_DIR, ChildFailed, in_child, spread, write_results
from bench.run_all import BENCHMARKS


def test_a_child_returns_what_it_emitted() -> None:
    found = in_child("one", "tests.unit.bench.emitting_child", ["a", "b c"])
    assert found == {"arguments": ["a", "b c"]}


def test_a_failed_child_raises_with_its_stderr_even_after_emitting() -> None:
    with pytest.raises(ChildFailed, match=r"two: failed \(exit 3\)") as failed:
        in_child("two", "tests.unit.bench.emitting_child", ["fail"])
    assert "the child's own error" in failed.value.stderr and failed.value.returncode == 3


def test_results_record_the_commit_the_machine_and_the_figures(tmp_path: Path) -> None:
    path = write_results("x", {"figure": 1.5}, tmp_path / "results")
    data = json.loads(path.read_text())
    assert path == tmp_path / "results" / "x.json"
    assert data["benchmark"] == "x" and data["figure"] == 1.5
    assert {"timestamp", "git_commit", "dirty", "machine"} <= set(data)
    assert data["machine"]["cpu_count"] >= 1 and "load_average" in data["machine"]


def test_a_spread_is_min_median_max_and_the_runs() -> None:
    assert spread([3, 1, 2]) == {"min": 1.0, "median": 2.0, "max": 3.0, "runs": [3.0, 1.0, 2.0]}
    with pytest.raises(ValueError, match="no values"):
        spread([])


def test_make_bench_runs_every_benchmark_and_quick_mode_writes_apart() -> None:
    present = sorted(p.stem for p in BENCH_DIR.glob("bench_*.py"))
    assert sorted(b.name for b in BENCHMARKS) == present
    for benchmark in BENCHMARKS:
        arguments = benchmark.arguments(True, Path("/o"))
        assert arguments[-2:] == ["--results", "/o/bench-quick/results"]
        assert "--results" not in benchmark.arguments(False, Path("/o"))
        assert not any("{" in a for a in arguments)


def test_a_results_file_leaves_the_tree_clean_and_a_code_change_does_not(tmp_path, monkeypatch):
    """Benches run one after another write results files; only code makes a figure dirty."""
    import subprocess

    from bench import harness

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "a.json").write_text("{}")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    monkeypatch.setattr(harness, "REPO_ROOT", tmp_path)
    assert harness.working_tree_dirty() is False
    (tmp_path / "bench" / "results" / "a.json").write_text('{"b": 1}')
    assert harness.working_tree_dirty() is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert harness.working_tree_dirty() is True
