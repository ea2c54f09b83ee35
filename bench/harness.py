"""What every benchmark shares: where, when and on what a figure was measured, the child
process a measurement runs in, and the results file it ends in.

A figure means little without its machine, the code it measured (git commit) and its spread
over repeats, so every results file carries them (``write_results``). A measurement runs in a
fresh process (``in_child``) so that one input's JVM, caches and memory peaks stay out of the
next one's figures; the child prints its result as one marked JSON line (``emit``).
Results go to ``bench/results/<name>.json`` (the figures docs/performance.md and
docs/accuracy.md are generated from) unless a benchmark's ``--results DIR`` says
otherwise (``make bench-quick`` writes to ``out/bench-quick/results``, so that its small-scale
figures never replace the committed ones).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
#: The RI 2010 block counts (ALARM project) that ``das fixture blocks`` expands into persons.
RI = REPO_ROOT.parent / "shared/data/real/alarm_census_2020_blocks/ri_2010_block.parquet"
#: What a child prints before its result's JSON, on one line of its stdout.
RESULT_MARK = "BENCH_RESULT "


# ---- where, when, on what ------------------------------------------------------------------
def package_version(name: str) -> str | None:
    """Installed version of a distribution, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as lines:
            for line in lines:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """CPU (model, count, usable), load, memory, platform and the versions that matter here.

    The load average is included because the machine may be shared: a figure taken under
    load is slower for reasons that are not the code's.
    """
    import psutil

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "memory_bytes": int(psutil.virtual_memory().total),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        **{name: package_version(name) for name in ("numpy", "pyspark", "pyarrow", "highspy")},
    }


def _git(*args: str) -> str | None:
    """Output of a read-only git command in the repository, or None outside git."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_commit() -> str | None:
    """The checked-out commit (``git rev-parse HEAD``), or None outside git.

    The working tree may hold uncommitted changes (``working_tree_dirty``); the commit is
    what the figure is closest to.
    """
    commit = (_git("rev-parse", "HEAD") or "").strip()
    return commit or None


def working_tree_dirty() -> bool | None:
    """Whether tracked files differ from the commit (``git status``), None outside git.

    The results folder is left out: benches run one after another (``make bench``) write
    their results files there, and a figure does not depend on another bench's file."""
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results")
    return None if status is None else bool(status.strip())


def timestamp() -> str:
    """Now, in UTC, ISO 8601 to the second (e.g. ``2025-01-31T12:00:00+00:00``)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def run_metadata() -> dict[str, Any]:
    """What every results file records besides its figures: time, commit, machine."""
    return {
        "timestamp": timestamp(),
        "git_commit": git_commit(),
        "dirty": working_tree_dirty(),
        "machine": machine_info(),
    }


# ---- figures over repeats and the results file ---------------------------------------------
def spread(values: Sequence[float]) -> dict[str, Any]:
    """A figure measured ``len(values)`` times: min, median, max and every run.

    The median is the figure to quote; min and max show how much the machine moved it.
    """
    if not values:
        raise ValueError("spread of no values")
    runs = [float(v) for v in values]
    return {"min": min(runs), "median": statistics.median(runs), "max": max(runs), "runs": runs}


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    """``--results DIR``: where ``write_results`` puts the file (default bench/results)."""
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS_DIR,
        help="folder of the results file (default: bench/results, the committed figures)",
    )


def write_results(name: str, data: Mapping[str, Any], folder: Path = RESULTS_DIR) -> Path:
    """Write ``{"benchmark": name, timestamp, git_commit, dirty, machine, **data}`` to
    ``folder/<name>.json`` (folder created; replaced atomically) and return the path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = path.with_name(path.name + ".tmp")
    payload = {"benchmark": name, **run_metadata(), **data}
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)
    return path


# ---- the child process ----------------------------------------------------------------------
class ChildFailed(RuntimeError):
    """A benchmark's child process exited with an error or printed no result."""

    def __init__(self, name: str, returncode: int, stderr: str) -> None:
        super().__init__(f"{name}: failed (exit {returncode}):\n{stderr[-4000:]}")
        self.returncode = returncode
        self.stderr = stderr


def emit(result: Any) -> None:
    """In a child: print ``result`` as the marked JSON line ``in_child`` reads."""
    print(RESULT_MARK + json.dumps(result), flush=True)


def in_child(
    name: str, module: str, arguments: Sequence[str], env: Mapping[str, str] | None = None
) -> Any:
    """Run ``python -m <module> <arguments>`` in a fresh process in the repository and
    return the result it ``emit``-ted (its last one); ChildFailed if it failed or printed
    none. ``name`` says which measurement it was in the error."""
    command = [sys.executable, "-m", module, *arguments]
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=None if env is None else dict(env),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(RESULT_MARK)]
    if done.returncode != 0 or not lines:
        raise ChildFailed(name, done.returncode, done.stderr)
    return json.loads(lines[-1][len(RESULT_MARK) :])


# ---- printing -------------------------------------------------------------------------------
def format_cell(value: object) -> str:
    """Numbers readable at a glance: thousands separators, about 3 significant decimals."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def _is_numeric_column(values: Sequence[object]) -> bool:
    """Numbers (missing values allowed) are right-aligned; anything else left-aligned."""
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in present
    )


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], title: str | None = None
) -> None:
    """Print rows under headers as a plain aligned table (numbers right-aligned)."""
    cells = [[format_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    numeric = [_is_numeric_column([row[i] for row in rows]) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    if title:
        print(title)
    print(line(list(headers)))
    print(line(["-" * w for w in widths]))
    for row in cells:
        print(line(row))
