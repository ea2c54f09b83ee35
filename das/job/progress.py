"""Progress lines for long work: one line when a phase starts, periodic lines while it runs
(done / total, elapsed, ETA), one line when it ends; and the timings for the certificate.

The counts come from a Spark accumulator that the executors add to as they finish each
geounit or parent; Spark reports accumulator updates when a task ends, so the figure moves
in steps of one task. A daemon thread polls it; nothing else is shared.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark import Accumulator, SparkContext

log = logging.getLogger("das.progress")


def _clock(seconds: float) -> str:
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
        suffix = f" ({total:,} {unit})" if total is not None else ""
        log.info("%s: started%s", name, suffix)
        stop = threading.Event()
        watcher = None
        if counter is not None and total:
            watcher = threading.Thread(
                target=self._watch, args=(name, total, counter, start, stop, unit), daemon=True
            )
            watcher.start()
        try:
            yield
        finally:
            stop.set()
            if watcher is not None:
                watcher.join()
            elapsed = time.perf_counter() - start
            self.timings[name] = self.timings.get(name, 0.0) + elapsed
            log.info("%s: done in %s", name, _clock(elapsed))

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
            eta = _clock(elapsed * (total - done) / done) if done else "?"
            log.info(
                "%s: %s/%s %s, elapsed %s, ETA %s",
                name,
                f"{done:,}",
                f"{total:,}",
                unit,
                _clock(elapsed),
                eta,
            )
