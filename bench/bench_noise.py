"""Speed of the exact discrete Gaussian sampler, with OpenDP's measured alongside.

    python -m bench.bench_noise [--size 1000000] [--repeats 5] [--opendp-size 100000]
        [--calls 20000] [--results DIR]

Beside each variance: the same draws keyed per row (``das.privacy.keyed``, what a sparse
run draws: one draw per row, each from its own ChaCha20 nonce), rows per second.

Prints a table and writes ``noise.json``. Everything runs in one process on one core, ours
and OpenDP's in the same run, so the ratio is meaningful even on a machine shared with
other work (the load average at the start and end is recorded so that a noisy run can be
recognised). Each timed figure keeps its spread over the repeats (min, median, max).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from bench.harness import add_results_argument, package_version, spread, write_results
from das.privacy.bernoulli import TOLERANCE
from das.privacy.candidates import Stats, compiled_draws
from das.privacy.generator import Rng, secure_rng
from das.privacy.keyed import keyed_rows, measurement_key
from das.privacy.plan import sampling_plan
from das.privacy.sampler import discrete_gaussian, discrete_gaussian_rows

SIGMA2S = (Fraction(1), Fraction(10), Fraction(100), Fraction(10000, 11), Fraction(10**4))


def timed(call: Callable[[], object], repeats: int) -> list[float]:
    """Wall-clock seconds of each of ``repeats`` calls (after one warm-up call)."""
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def counted_draws(sigma2: Fraction, size: int, rng: Rng) -> Stats | None:
    """Draw as ``discrete_gaussian`` does where its compiled path runs (every sigma2 here),
    counting the candidates and exact decisions; None where that path does not run."""
    plan = sampling_plan(sigma2.numerator, sigma2.denominator, TOLERANCE)
    if plan.final is None:
        return None
    stats = Stats()
    compiled_draws(plan, size, rng, stats)
    return stats


def ours_throughput(sigma2: Fraction, size: int, repeats: int) -> dict[str, Any]:
    rng = secure_rng()
    times = timed(lambda: discrete_gaussian(sigma2, size, rng), repeats)
    before = rng.words_used
    stats = counted_draws(sigma2, size, rng)
    return {
        "draws_per_s_best": size / min(times),
        "draws_per_s_median": size / statistics.median(times),
        "seconds": spread(times),
        "candidates_per_draw": None if stats is None else stats.candidates / size,
        "words_per_draw": (rng.words_used - before) / size,
        "exact_decisions_per_draw": None if stats is None else stats.exact_decisions / size,
    }


def keyed_throughput(sigma2: Fraction, size: int, repeats: int) -> dict[str, Any]:
    """Rows per second of ``keyed_rows``: ``size`` rows of one measurement, one draw each."""
    key = measurement_key(secure_rng(), "block|440070001001000|detailed")
    owners, rows = np.zeros(size, dtype=np.int64), np.arange(size, dtype=np.int64)
    times = timed(lambda: keyed_rows([key], owners, rows, sigma2), repeats)
    return {
        "rows_per_s_best": size / min(times),
        "rows_per_s_median": size / statistics.median(times),
        "seconds": spread(times),
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


def opendp_throughput(sigma2: Fraction, size: int, repeats: int) -> dict[str, Any] | None:
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
        "seconds": spread(times),
    }


def keystream_gbytes_per_s() -> float:
    rng = secure_rng()
    words = 1 << 20
    return 8 * words / min(timed(lambda: rng.random_uint64(words), 5)) / 1e9


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="draws per timed call")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--opendp-size", type=int, default=100_000)
    parser.add_argument(
        "--calls", type=int, default=20_000, help="calls of one draw (a twentieth of 2,016)"
    )
    add_results_argument(parser)
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    rows = []
    for sigma2 in SIGMA2S:
        ours = ours_throughput(sigma2, args.size, args.repeats)
        theirs = opendp_throughput(sigma2, args.opendp_size, 2)
        ratio = None if theirs is None else ours["draws_per_s_best"] / theirs["draws_per_s_best"]
        keyed = keyed_throughput(sigma2, args.size, args.repeats)
        rows.append(
            {
                "sigma2": str(sigma2),
                "ours": ours,
                "opendp": theirs,
                "ratio_best": ratio,
                "keyed": keyed,
            }
        )

    overhead = []
    for size, calls in ((1, args.calls), (2016, max(1, args.calls // 20))):
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
    children = args.calls
    child_s = statistics.median(timed(lambda: [root.child(f"b|{i}") for i in range(children)], 3))

    result: dict[str, object] = {
        "measures": "das.privacy.sampler.discrete_gaussian (secure_rng) vs opendp make_gaussian",
        "versions": {n: package_version(n) for n in ("cryptography", "opendp", "numba")},
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "size": args.size,
        "repeats": args.repeats,
        "opendp_size": args.opendp_size,
        "calls": args.calls,
        "throughput": rows,
        "per_call": overhead,
        "child_creation_us": child_s / children * 1e6,
        "keystream_gbytes_per_s": keystream_gbytes_per_s(),
    }
    report(result)
    print(f"\nwritten to {write_results('noise', result, args.results)}")
    return result


def report(result: dict[str, object]) -> None:
    print(f"opendp {result['versions']['opendp']}; load {result['load_average_before'][0]:.2f}")
    print(
        f"\n{'sigma2':>8} {'ours best/s':>13} {'ours median/s':>14} "
        f"{'opendp best/s':>14} {'ratio':>7} {'words/draw':>11} {'keyed rows/s':>13}"
    )
    for row in result["throughput"]:
        ours, theirs = row["ours"], row["opendp"]
        opendp = f"{theirs['draws_per_s_best']:14,.0f}" if theirs else f"{'n/a':>14}"
        ratio = f"{row['ratio_best']:7.0f}" if row["ratio_best"] else f"{'n/a':>7}"
        print(
            f"{row['sigma2']:>8} {ours['draws_per_s_best']:13,.0f} "
            f"{ours['draws_per_s_median']:14,.0f} {opendp} {ratio} "
            f"{ours['words_per_draw']:11.2f} {row['keyed']['rows_per_s_best']:13,.0f}"
        )
    print(
        f"\n{'size':>6} {'child per call':>15} {'us/call':>9} {'us/stream, one call for all':>28}"
    )
    for row in result["per_call"]:
        rows = row["us_per_stream_one_call"]
        print(
            f"{row['size']:>6} {row['fresh_child_per_call']!s:>15} {row['us_per_call']:9.1f} "
            f"{'' if rows is None else f'{rows:.1f}':>28}"
        )
    print(
        f"\nchild(label): {result['child_creation_us']:.2f} us; "
        f"keystream: {result['keystream_gbytes_per_s']:.2f} GB/s"
    )


if __name__ == "__main__":
    main()
