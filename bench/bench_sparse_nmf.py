"""Bytes per published noisy value of a sparse NMF, beside the entropy of the discrete
Gaussian at the level's sigma (the floor: no lossless file can average fewer bits per
value than the noise's entropy), and the keyed sampler's speed on the same rows.

    python -m bench.bench_sparse_nmf [--blocks 200] [--support 3000] [--results DIR]

A synthetic DHC-P block level (configs/dhcp_production.toml, test mode): each block's
reach is ``--support`` cells drawn from the schema (its parent's support), its persons a
few dozen of those cells. The level is measured by ``das.privacy.sparse`` and written as
the tasks write the NMF (pyarrow, zstd, dictionaries); the figure is the file's bytes over
the values it holds, then per column (``values`` alone, ``rows`` alone). No Spark.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.harness import add_results_argument, write_results
from das.privacy.generator import seeded_rng
from das.privacy.keyed import keyed_rows
from das.privacy.measure import NMF_ARROW
from das.privacy.sparse import measure_sparse_geounits
from das.spec.config import load_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "dhcp_production.toml"
LEVEL = "block"


def entropy_bits(sigma2: Fraction) -> float:
    """Entropy in bits of N_Z(0, sigma2), summed over |k| <= 40 sigma (the rest is < 1e-300)."""
    s2 = float(sigma2)
    k = np.arange(-int(40 * math.sqrt(s2)) - 2, int(40 * math.sqrt(s2)) + 3)
    w = np.exp(-(k.astype(np.float64) ** 2) / (2 * s2))
    p = w / w.sum()
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def synthetic_level(
    cells: int, blocks: int, support: int, seed: int
) -> tuple[list[str], tuple[np.ndarray, ...], tuple[np.ndarray, np.ndarray]]:
    gen = np.random.default_rng(seed)
    reach_rows, reach_cells, rows, hist, counts = [], [], [], [], []
    for b in range(blocks):
        reach = np.sort(gen.choice(cells, support, replace=False))
        reach_rows.append(np.full(support, b))
        reach_cells.append(reach)
        people = np.unique(gen.choice(reach, 30))
        rows.append(np.full(people.size, b))
        hist.append(people)
        counts.append(gen.integers(1, 4, people.size))
    geocodes = [f"44007{b:010d}" for b in range(blocks)]
    flat = tuple(np.concatenate(p).astype(np.int64) for p in (rows, hist, counts))
    return geocodes, flat, (np.concatenate(reach_rows), np.concatenate(reach_cells))


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=200)
    parser.add_argument("--support", type=int, default=3000, help="cells each block reaches")
    add_results_argument(parser)
    args = parser.parse_args(argv)

    config = load_config(CONFIG, overrides=["run.production=false"], seed=1)
    queries = tuple(sorted(config.queries[LEVEL], key=lambda q: q.name))
    variances = {q.name: config.budget.sigma2(LEVEL, q.name) for q in queries}
    geocodes, (rows, cells, counts), reach = synthetic_level(
        config.schema.size, args.blocks, args.support, seed=7
    )
    rng = seeded_rng(1)
    one = np.zeros(1, dtype=np.int64)
    keyed_rows([bytes(32)], one, one, variances[queries[0].name])  # the kernel loaded, untimed
    start = time.perf_counter()
    batch = measure_sparse_geounits(
        LEVEL, geocodes, rows, cells, counts, reach, queries, variances, rng
    )
    seconds = time.perf_counter() - start
    values = int(sum(len(v) for v in batch.column("values").to_pylist()))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "part-00000.parquet")
        with pq.ParquetWriter(path, NMF_ARROW, compression="zstd") as writer:
            writer.write_batch(batch)
        size = os.path.getsize(path)
        delta = os.path.join(folder, "delta.parquet")
        plain = [f.name for f in NMF_ARROW if f.name != "rows"]
        with pq.ParquetWriter(
            delta, NMF_ARROW, compression="zstd", use_dictionary=plain,
            column_encoding={"rows": "DELTA_BINARY_PACKED"},
        ) as writer:  # fmt: skip
            writer.write_batch(batch)
        delta_size = os.path.getsize(delta)
        meta = pq.ParquetFile(path).metadata
        by_column: dict[str, int] = {}
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                column = meta.row_group(g).column(c)
                name = column.path_in_schema.split(".")[0]
                by_column[name] = by_column.get(name, 0) + column.total_compressed_size
    sigma2s = sorted({str(v) for v in variances.values()})
    floor = {s: entropy_bits(Fraction(s)) / 8 for s in sigma2s}
    result: dict[str, object] = {
        "measures": "das.privacy.sparse.measure_sparse_geounits, one file as the tasks write it",
        "config": str(CONFIG.relative_to(ROOT)),
        "level": LEVEL,
        "blocks": args.blocks,
        "support_cells": args.support,
        "values": values,
        "file_bytes": size,
        "bytes_per_value": size / values,
        "column_bytes_per_value": {k: v / values for k, v in by_column.items()},
        "bytes_per_value_rows_delta_encoded": delta_size / values,
        "entropy_bytes_per_value": floor,
        "measure_seconds": seconds,
        "values_per_s": values / seconds,
        "load_average": os.getloadavg(),
    }
    print(f"{values:,} noisy values of {args.blocks} blocks ({args.support} reached cells each)")
    print(f"file: {size:,} bytes = {size / values:.3f} bytes per value")
    for name, b in by_column.items():
        print(f"  {name:<16} {b / values:.3f} bytes per value")
    print(
        f"with rows delta-encoded (DELTA_BINARY_PACKED): {delta_size / values:.3f} bytes per value"
    )
    for s, f in floor.items():
        print(f"entropy of N_Z(0, {s}) (sigma {math.sqrt(Fraction(s)):.1f}): {f:.3f} bytes")
    print(f"measured in {seconds:.2f} s: {values / seconds:,.0f} values/s (one core)")
    print(f"\nwritten to {write_results('sparse_nmf', result, args.results)}")
    return result


if __name__ == "__main__":
    main()
