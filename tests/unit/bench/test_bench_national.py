"""The national benchmark's pure parts: fixture arguments, phase spans, per-phase usage,
levels' families and the goals."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

from bench.bench_national import GIB, INPUTS, PhaseMarks, level_detail, phase_usage
from bench.goals import national_goal_rows as goal_rows


def test_fixture_arguments_scale_the_persons_only() -> None:
    la, texas, us = INPUTS
    assert la.arguments(0.02) == [
        "--persons", "200000", "--states", "1", "--counties", "1", "--tracts", "2500",
        "--empty-blocks", "0.33", "--seed", "1",
    ]  # fmt: skip
    assert texas.arguments(1.0)[:6] == [
        "--persons",
        "5000000",
        "--states",
        "1",
        "--counties",
        "254",
    ]
    assert "--tracts" not in us.arguments(1.0) and us.states == 52 and us.counties == 60


def test_phase_marks_come_from_the_progress_log() -> None:
    marks = PhaseMarks()
    log = logging.getLogger("test.national.progress")
    log.setLevel(logging.INFO)
    log.addHandler(marks)
    log.info("%s: started%s", "solve tract", " (1 parents)")
    log.info("%s: 1/2 parents, elapsed %s", "solve tract", "0:01")
    log.info("%s: done in %s", "solve tract", "0:02")
    log.removeHandler(marks)
    start, end = marks.spans["solve tract"]
    assert list(marks.spans) == ["solve tract"] and start <= end


def test_phase_usage_differences_cpu_and_takes_peaks_inside_the_span() -> None:
    series = [
        (0.0, 0.0, 100, 10),
        (1.0, 1.0, 300, 50),
        (2.0, 3.0, 200, 20),
        (3.0, 4.0, 900, 90),
    ]
    usage = phase_usage({"a": [0.5, 2.0], "b": [2.9, 2.95]}, series)
    assert usage["a"] == {"cpu_s": 2.5, "peak_rss_bytes": 300, "peak_worker_rss_bytes": 50}
    # no sample inside b: the nearest one (t = 3)
    assert usage["b"]["peak_rss_bytes"] == 900
    assert usage["b"]["cpu_s"] == pytest.approx(0.05)
    assert phase_usage({"a": [0.0, 1.0]}, []) == {}


def test_level_detail_finds_the_largest_family(tmp_path: Path) -> None:
    """The checkpoint's geounits; each parent's seconds from the confidential directory."""
    output = tmp_path / "run"
    level = output / "levels" / "tract"
    level.mkdir(parents=True)
    geocodes = ["99001000100", "99001000200", "99003000100", "99003000200", "99003000300"]
    pd.DataFrame({"geocode": geocodes, "solves": [1, 0, 1, 0, 0]}).to_parquet(
        level / "part-0.parquet"
    )
    (tmp_path / "run-confidential" / "solve_seconds").mkdir(parents=True)
    pd.DataFrame({"geocode": ["99001000100", "99003000100"], "seconds": [0.5, 2.0]}).to_csv(
        tmp_path / "run-confidential" / "solve_seconds" / "tract.csv", index=False
    )
    detail = level_detail(output, "tract", 5)
    assert detail["geounits"] == 5 and detail["parents"] == 2
    assert detail["largest_parent"] == "99003" and detail["largest_children"] == 3
    assert detail["max_s"] == 2.0 and detail["p99_s"] == pytest.approx(0.5 + 0.99 * 1.5)


def test_goals_apply_to_their_inputs_and_need_a_valid_run() -> None:
    def run(name: str, wall: float, valid: bool = True) -> dict:
        return {
            "input": name,
            "wall_s": wall,
            "validated": valid,
            "peak_rss_bytes": {"all": 7 * GIB},
            "largest_family": {"seconds": 61.0},
        }

    rows = goal_rows([run("la_like", 290.0), run("texas_like", 170.0, valid=False)], 1.0)
    by = {(r["input"], r["goal"]): r for r in rows}
    assert by[("la_like", "end to end <= 5 min")]["met"] is True
    assert by[("la_like", "peak memory, all processes <= 8 GiB")]["met"] is True
    assert by[("la_like", "largest family <= 60 s wall")]["met"] is False
    assert by[("texas_like", "end to end <= 3 min")]["met"] is False  # not validated
    assert ("texas_like", "peak memory, all processes <= 8 GiB") not in by
    assert all(r["applies"] for r in rows)
    assert not any(r["applies"] for r in goal_rows([run("la_like", 1.0)], 0.1))


def test_tree_sampler_sees_a_child_and_counts_cpu() -> None:
    import itertools
    import subprocess
    import sys
    import time

    from bench.bench_national import TreeSampler

    # A tree of its own: the test process's tree holds the Spark of earlier tests, whose
    # Python workers exit at any time (their CPU leaves the series until their parent reaps
    # them), so its CPU series is not monotone.
    child = (
        "import time; x = bytearray(80_000_000); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)"
    )
    parent = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "print(flush=True)\n"
        "sys.stdin.readline()\n"  # the sampler has started: CPU it must see
        "deadline = time.process_time() + 0.3\n"
        "while time.process_time() < deadline:\n"
        "    pass\n"
        "time.sleep(2.5)\n"  # the tree is searched every second
        "child.kill(); child.wait()\n"
        "print(flush=True)\n"
        "sys.stdin.readline()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", parent], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as root:
        assert root.stdin is not None and root.stdout is not None
        try:
            root.stdout.readline()
            sampler = TreeSampler(root.pid)
            with sampler:
                time.sleep(0.3)  # a first sample before the busy loop
                root.stdin.write("\n")
                root.stdin.flush()
                root.stdout.readline()  # the child is killed and reaped
        finally:
            root.kill()
    assert sampler.peaks.workers >= 80_000_000 and sampler.peaks.driver > 0
    assert max(s[3] for s in sampler.series) >= 80_000_000  # the largest worker
    # all processes at once: the largest sum at one sample, at most the groups' own peaks
    assert sampler.peaks.total == max(s[2] for s in sampler.series)
    assert sampler.peaks.workers <= sampler.peaks.total <= sampler.peaks.sum_of_groups()
    assert sampler.peaks.report()["all"] == sampler.peaks.total
    cpu = [s[1] for s in sampler.series]
    # the busy loop's 0.3 s, and nothing lost when the child exits (reaped: its parent's)
    assert cpu[-1] - cpu[0] >= 0.25
    assert all(b >= a for a, b in itertools.pairwise(cpu))
    assert sampler.own_cpu > 0
