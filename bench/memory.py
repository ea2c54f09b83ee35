"""Peak resident memory of a benchmark's process tree: the driver's Python, the JVM and the
Python workers, sampled in a thread.

Spark's driver, JVM and Python workers peak at different times, so the figure a machine must
hold is the largest sum at one sample, not the sum of each group's own peak; both are kept.
Sampling misses spikes shorter than its interval; the kernel's high-water mark (``vm_hwm``)
does not, and is kept beside it where /proc has it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil

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
