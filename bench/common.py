"""Small helpers shared by the benchmark scripts: where, when and on what a figure was measured.

A benchmark figure means little without its machine (cores, versions), the code it measured
(git commit) and the time it was taken, so every result file carries them. Results go to
``bench/results/<name>.json``; ``print_table`` prints the same figures as plain text.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


def package_version(name: str) -> str | None:
    """Installed version of a distribution, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """CPU count (all and usable), load, memory, platform and the versions that matter here.

    The load average is included because the machine may be shared: a figure taken under
    load is slower for reasons that are not the code's.
    """
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "memory_bytes": _total_memory(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "numpy": package_version("numpy"),
        "pyspark": package_version("pyspark"),
        "pyarrow": package_version("pyarrow"),
    }
    return info


def _total_memory() -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().total)


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

    The working tree may hold uncommitted changes; the commit is what the figure is closest to.
    """
    commit = (_git("rev-parse", "HEAD") or "").strip()
    return commit or None


def working_tree_dirty() -> bool | None:
    """Whether tracked files differ from the commit (``git status``), None outside git."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status.strip())


def timestamp() -> str:
    """Now, in UTC, ISO 8601 to the second (e.g. ``2025-01-31T12:00:00+00:00``)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def run_metadata() -> dict[str, Any]:
    """What every result file records besides its figures: time, commit, machine."""
    return {"timestamp": timestamp(), "git_commit": git_commit(), "machine": machine_info()}


def write_results(name: str, data: Mapping[str, Any]) -> Path:
    """Write ``{"benchmark": name, timestamp, git_commit, machine, **data}`` to
    ``bench/results/<name>.json`` (folder created; replaced atomically) and return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    tmp = path.with_name(path.name + ".tmp")
    payload = {"benchmark": name, **run_metadata(), **data}
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)
    return path


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


# ---- memory: peak RSS of this process, its JVM and its Python workers -------------------
#: How often RssSampler looks (seconds); spikes shorter than this are missed (VmHWM is not).
SAMPLE_SECONDS = 0.05


@dataclass
class Peaks:
    """Peak resident memory seen so far, in bytes: of all processes at once, and by group.

    ``total`` is the peak of the sum at one sample, what the machine had to hold; the
    groups peak at different times (the JVM late, the Python workers in the solves), so the
    sum of their peaks (``sum_of_groups``) overstates it.
    """

    total: int = 0
    driver: int = 0
    jvm: int = 0
    workers: int = 0
    jvm_pids: set[int] = field(default_factory=set)

    def see(self, driver: int, jvm: int, workers: int) -> None:
        """Take one sample's RSS of each group (bytes) into the peaks."""
        self.total = max(self.total, driver + jvm + workers)
        self.driver = max(self.driver, driver)
        self.jvm = max(self.jvm, jvm)
        self.workers = max(self.workers, workers)

    def sum_of_groups(self) -> int:
        return self.driver + self.jvm + self.workers

    def report(self) -> dict[str, int]:
        """The peaks as benchmarks record them (bytes): ``all`` is the concurrent peak."""
        return {
            "driver_python": self.driver,
            "jvm_driver_and_executors": self.jvm,
            "python_workers": self.workers,
            "sum_of_group_peaks": self.sum_of_groups(),
            "all": self.total,
        }


class RssSampler:
    """Samples the RSS of a process and its descendants in a daemon thread, keeping peaks.

    Descendants named ``java`` count as the JVM; other descendants (Python workers, shells)
    as workers. Sampling misses spikes shorter than the interval; VmHWM does not.
    """

    def __init__(self, pid: int, interval: float = SAMPLE_SECONDS) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peaks = Peaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        jvm = workers = 0
        try:
            driver = self.process.memory_info().rss
            children = self.process.children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            try:
                rss = child.memory_info().rss
                is_java = child.name() == "java"
            except psutil.Error:
                continue
            if is_java:
                jvm += rss
                self.peaks.jvm_pids.add(child.pid)
            else:
                workers += rss
        self.peaks.see(driver, jvm, workers)


def vm_hwm(pid: int) -> int | None:
    """Kernel high-water mark of a process's RSS in bytes (Linux), None if unavailable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
