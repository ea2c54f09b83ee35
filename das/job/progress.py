"""Progress lines for long work: one line when a phase starts, periodic lines while it runs
(done / total, elapsed, ETA), one line when it ends with the whole run's elapsed time and
ETA; and the timings for the certificate.

The counts come from a Spark accumulator that the executors add to as they finish each
geounit or parent; Spark reports accumulator updates when a task ends, so the figure moves
in steps of one task. A daemon thread polls it; nothing else is shared.

The run's ETA is crude: the phases are known in advance (``run_phases``), each weighs what
it took on the RI fixture (docs/performance.md), and the weights still to come are scaled
by the seconds per weight of the phases done so far.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark import Accumulator, SparkContext

log = logging.getLogger("das.progress")

#: Wall seconds of each phase of the production job on the RI fixture (docs/performance.md),
#: as the relative weights of the run's ETA.
PHASE_WEIGHTS = {
    "read": 23.0,
    "measure": 11.1,
    "estimate": 5.0,
    "solve us": 1.7,
    "solve state": 1.5,
    "solve county": 1.7,
    "solve tract": 6.9,
    "solve block_group": 5.4,
    "solve block": 14.3,
    "write": 2.5,
    "metrics (confidential)": 3.3,
    "validate": 5.4,
}
#: A level of another name weighs as the RI levels' average.
OTHER_LEVEL_WEIGHT = 5.25

ETA_METHOD = (
    "ETA: the phases to come, weighted by their share of an RI run (docs/performance.md), "
    "at this run's seconds per weight so far"
)


def run_phases(levels: Sequence[str], sparse: bool = False) -> tuple[str, ...]:
    """The phases of a run, in order (``das.job.run`` names its phases so). A sparse run
    measures each level just before its solve, and has no estimate (``das.job.sparse``)."""
    end = ("write", "metrics (confidential)", "validate")
    if sparse:
        steps = tuple(p for level in levels for p in (f"measure {level}", f"solve {level}"))
        return ("read", *steps, *end)
    solves = tuple(f"solve {level}" for level in levels)
    return ("read", "measure", "estimate", *solves, *end)


def remaining_seconds(
    plan: Sequence[str], timings: Mapping[str, float], current: str
) -> float | None:
    """Estimated seconds of the phases after ``current``: their weights times the seconds per
    weight of the timed phases up to it (None before any time is known)."""
    index = plan.index(current)
    done = [p for p in plan[: index + 1] if p in timings]
    weight = sum(_weight(p) for p in done)
    if not weight:
        return None
    rate = sum(timings[p] for p in done) / weight
    return rate * sum(_weight(p) for p in plan[index + 1 :])


def _weight(phase: str) -> float:
    return PHASE_WEIGHTS.get(phase, OTHER_LEVEL_WEIGHT)


def clock(seconds: float) -> str:
    """Seconds for people: 5s, 1m05s, 1h01m."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class Progress:
    """Phase timings of one run, and the progress lines that go with them."""

    context: SparkContext | None = None
    interval: float = 10.0
    timings: dict[str, float] = field(default_factory=dict)
    #: The run's phases in order (``run_phases``): each one's end logs the run's ETA.
    plan: tuple[str, ...] = ()
    started: float = field(default_factory=time.perf_counter)

    def counter(self) -> Accumulator | None:
        """A fresh counter for executors to add to (None without Spark)."""
        return self.context.accumulator(0) if self.context is not None else None

    @contextmanager
    def phase(
        self,
        name: str,
        total: int | None = None,
        counter: Accumulator | None = None,
        unit: str = "geounits",
    ) -> Iterator[None]:
        start = time.perf_counter()
        if self.plan and name == self.plan[0]:
            log.info("run: %d phases: %s; %s", len(self.plan), ", ".join(self.plan), ETA_METHOD)
        suffix = f" ({total:,} {unit})" if total is not None else ""
        log.info("%s: started%s", name, suffix)
        stop = threading.Event()
        watcher = None
        if counter is not None and total:
            watcher = threading.Thread(
                target=self._watch, args=(name, total, counter, start, stop, unit), daemon=True
            )
            watcher.start()
        ended = "interrupted"
        try:
            yield
            ended = "done"
        except KeyboardInterrupt:
            raise
        except BaseException:
            ended = "failed"
            raise
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
            elapsed = time.perf_counter() - start
            self.timings[name] = self.timings.get(name, 0.0) + elapsed
            # a phase that did not finish is never reported done, nor counted among those done
            log.info(
                "%s: %s %s %s", name, ended, "in" if ended == "done" else "after", clock(elapsed)
            )
            if name in self.plan and ended == "done":
                self._overall(name)

    def _overall(self, name: str) -> None:
        """The whole run after phase ``name``: phases done, elapsed, ETA."""
        left = remaining_seconds(self.plan, self.timings, name)
        log.info(
            "run: %d/%d phases done, elapsed %s, ETA %s",
            self.plan.index(name) + 1,
            len(self.plan),
            clock(time.perf_counter() - self.started),
            "?" if left is None else clock(left),
        )

    def _watch(
        self,
        name: str,
        total: int,
        counter: Accumulator,
        start: float,
        stop: threading.Event,
        unit: str,
    ) -> None:
        while not stop.wait(self.interval):
            done = counter.value
            elapsed = time.perf_counter() - start
            eta = clock(elapsed * (total - done) / done) if done else "?"
            log.info(
                "%s: %s/%s %s, elapsed %s, ETA %s",
                name,
                f"{done:,}",
                f"{total:,}",
                unit,
                clock(elapsed),
                eta,
            )


@contextmanager
def phase(
    progress: Progress,
    name: str,
    total: int | None = None,
    counter: Accumulator | None = None,
    unit: str = "geounits",
) -> Iterator[None]:
    """A progress phase whose Spark jobs carry its name as their description.

    The name shows in the Spark UI's job list and in the event log, where
    ``bench/bench_cluster.py`` maps stages back to phases (e.g. ``solve block``).
    """
    context = progress.context
    if context is not None:
        context.setJobDescription(name)
    try:
        with progress.phase(name, total, counter, unit):
            yield
    finally:
        if context is not None:
            context.setJobDescription(None)  # type: ignore[arg-type]  # None clears it
