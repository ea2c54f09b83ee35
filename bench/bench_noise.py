"""Speed of the exact discrete Gaussian sampler, with OpenDP's measured alongside.

Run as ``python -m bench.bench_noise``. Prints a table and writes bench/results/noise.json.
Everything runs in one process on one core, ours and OpenDP's in the same run, so the
ratio is meaningful even on a machine shared with other work (the load average at the
start and end is recorded so that a noisy run can be recognised).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from importlib import metadata
from pathlib import Path

import numpy as np

from das.privacy.candidates import Stats
from das.privacy.generator import secure_rng
from das.privacy.sampler import _sample, discrete_gaussian, discrete_gaussian_rows

SIGMA2S = (Fraction(1), Fraction(10), Fraction(100), Fraction(10**4))
RESULTS = Path(__file__).resolve().parent / "results" / "noise.json"


def timed(call: Callable[[], object], repeats: int) -> list[float]:
    """Wall-clock seconds of each of ``repeats`` calls (after one warm-up call)."""
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def ours_throughput(sigma2: Fraction, size: int, repeats: int) -> dict[str, float]:
    rng = secure_rng()
    times = timed(lambda: discrete_gaussian(sigma2, size, rng), repeats)
    stats = Stats()
    before = rng.words_used
    _sample(sigma2, size, rng, stats=stats)
    return {
        "draws_per_s_best": size / min(times),
        "draws_per_s_median": size / statistics.median(times),
        "candidates_per_draw": stats.candidates / size,
        "words_per_draw": (rng.words_used - before) / size,
        "exact_decisions_per_draw": stats.exact_decisions / size,
    }


def per_call_us(sigma2: Fraction, size: int, calls: int, fresh_child: bool) -> float:
    """Median over 3 runs of the mean time per call, in microseconds."""
    root = secure_rng()
    if fresh_child:  # the Spark pattern: a child generator per (geounit, query)

        def run() -> None:
            for i in range(calls):
                discrete_gaussian(sigma2, size, root.child(f"block|{i:015d}|detailed"))
    else:

        def run() -> None:
            for _ in range(calls):
                discrete_gaussian(sigma2, size, root)

    return statistics.median(timed(run, 3)) / calls * 1e6


def rows_us(sigma2: Fraction, size: int, streams: int) -> float:
    """``per_call_us``'s fresh-child pattern with one call for all the streams
    (``discrete_gaussian_rows``, what das.privacy.measure does): median of 3 runs, per stream."""
    root = secure_rng()
    labels = [f"block|{i:015d}|detailed" for i in range(streams)]

    def run() -> None:
        discrete_gaussian_rows(sigma2, size, [root.child(label) for label in labels])

    return statistics.median(timed(run, 3)) / streams * 1e6


def opendp_throughput(sigma2: Fraction, size: int, repeats: int) -> dict[str, float] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    measurement = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=math.sqrt(sigma2)
    )
    zeros = [0] * size
    times = timed(lambda: measurement(zeros), repeats)
    return {
        "draws_per_s_best": size / min(times),
        "draws_per_s_median": size / statistics.median(times),
    }


def keystream_gbytes_per_s() -> float:
    rng = secure_rng()
    words = 1 << 20
    return 8 * words / min(timed(lambda: rng.random_uint64(words), 5)) / 1e9


def machine() -> dict[str, object]:
    info: dict[str, object] = {
        "cpu_count": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "cryptography": metadata.version("cryptography"),
    }
    try:
        info["opendp"] = metadata.version("opendp")
    except metadata.PackageNotFoundError:
        info["opendp"] = None
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            info["cpu"] = names[0]
    except OSError:
        pass
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return info


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="draws per timed call")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--opendp-size", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    rows = []
    for sigma2 in SIGMA2S:
        ours = ours_throughput(sigma2, args.size, args.repeats)
        theirs = opendp_throughput(sigma2, args.opendp_size, 2)
        ratio = None if theirs is None else ours["draws_per_s_best"] / theirs["draws_per_s_best"]
        rows.append({"sigma2": str(sigma2), "ours": ours, "opendp": theirs, "ratio_best": ratio})

    overhead = []
    for size, calls in ((1, 20_000), (2016, 1_000)):
        for fresh in (False, True):
            overhead.append(
                {
                    "sigma2": "10",
                    "size": size,
                    "fresh_child_per_call": fresh,
                    "us_per_call": per_call_us(Fraction(10), size, calls, fresh),
                    # the same streams drawn by one call for all (fresh children only)
                    "us_per_stream_one_call": rows_us(Fraction(10), size, calls) if fresh else None,
                }
            )
    root = secure_rng()
    child_us = statistics.median(timed(lambda: [root.child(f"b|{i}") for i in range(20_000)], 3))

    result: dict[str, object] = {
        "benchmark": "das.privacy.sampler.discrete_gaussian (secure_rng) vs opendp make_gaussian",
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "size": args.size,
        "repeats": args.repeats,
        "opendp_size": args.opendp_size,
        "throughput": rows,
        "per_call": overhead,
        "child_creation_us": child_us / 20_000 * 1e6,
        "keystream_gbytes_per_s": keystream_gbytes_per_s(),
    }
    report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
    return result


def report(result: dict[str, object]) -> None:
    m = result["machine"]
    print(f"{m['cpu']} x{m['cpu_count']}, Python {m['python']}, numpy {m['numpy']}, "
          f"opendp {m['opendp']}; load {result['load_average_before'][0]:.2f}")
    print(f"\n{'sigma2':>8} {'ours best/s':>13} {'ours median/s':>14} "
          f"{'opendp best/s':>14} {'ratio':>7} {'words/draw':>11}")
    for row in result["throughput"]:
        ours, theirs = row["ours"], row["opendp"]
        opendp = f"{theirs['draws_per_s_best']:14,.0f}" if theirs else f"{'n/a':>14}"
        ratio = f"{row['ratio_best']:7.0f}" if row["ratio_best"] else f"{'n/a':>7}"
        print(f"{row['sigma2']:>8} {ours['draws_per_s_best']:13,.0f} "
              f"{ours['draws_per_s_median']:14,.0f} {opendp} {ratio} "
              f"{ours['words_per_draw']:11.2f}")
    print(f"\n{'size':>6} {'child per call':>15} {'us/call':>9} {'us/stream, one call for all':>28}")
    for row in result["per_call"]:
        rows = row["us_per_stream_one_call"]
        print(f"{row['size']:>6} {row['fresh_child_per_call']!s:>15} {row['us_per_call']:9.1f} "
              f"{'' if rows is None else f'{rows:.1f}':>28}")
    print(f"\nchild(label): {result['child_creation_us']:.2f} us; "
          f"keystream: {result['keystream_gbytes_per_s']:.2f} GB/s")


if __name__ == "__main__":
    main()
