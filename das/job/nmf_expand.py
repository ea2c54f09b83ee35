"""``das nmf expand OUTPUT --input DIR --level L --geocode G``: every row of a geounit's
noisy answers in a sparse run, the rows its NMF holds and the ones it does not.

What it costs in privacy, and why it needs the key and the input: a sparse run's NMF holds
some rows of the full measurement, the one the accounting charged for (every query, every
row, at every geounit); the other rows are the same measurement's, never drawn. Their
noisy answer is the true answer plus the row's keyed noise (``das.privacy.keyed``), so
recomputing them needs the confidential input and the run's noise key, and publishing
them costs nothing beyond the charged measurement. It never shows noise alone (noise and
a published noisy answer give the truth), only noisy answers.

Whose key: a test run's key is derived from its seed (``seeded_rng``), recorded in
run.json, so expand works for test runs. A production run's key came from the operating
system and was never stored (``secure_rng``): nobody can expand it, by design, and the
command says so. Every row the NMF holds is recomputed too and must equal it; a
mismatch (another input, another run) is refused rather than printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from das.errors import UserError
from das.input.read import LevelHistograms, count_geounits, read_histograms
from das.output.validate import load_run_config
from das.privacy.generator import seeded_rng
from das.privacy.keyed import row_noise
from das.privacy.measure import NMF_ARROW, noise_label
from das.privacy.nmf import read_nmf
from das.spec.bypass import chain_of
from das.spec.config import Config
from das.spec.schema import Query

#: Why a production run cannot be expanded: pinned in tests.
NO_KEY = (
    "{output} is a production run: its noise key came from the operating system and was "
    "never stored, so no row its NMF does not hold can be recomputed (by design: nmf/ is "
    "all it publishes)"
)


@dataclass(frozen=True)
class Expanded:
    """One query of one geounit: every row's noisy answer, and how many rows the NMF held
    (each equal to the recomputed value)."""

    query: Query
    variance: Fraction
    values: np.ndarray
    held: int


def expand_query(
    config: Config, level: str, geocode: str, cells: np.ndarray, counts: np.ndarray, query: Query
) -> np.ndarray:
    """The noisy answer of every row of ``query`` at a geounit (its true histogram as
    cells and counts) in a test run: the truth plus each row's keyed noise."""
    if config.seed is None:
        raise UserError("a production run's noise cannot be recomputed")
    rng = seeded_rng(config.seed)
    sigma2 = config.measured.sigma2(level, query.name)  # after the single-child bypass
    noise = row_noise(rng, noise_label(level, geocode, query.name), np.arange(query.size), sigma2)
    return query.answer(cells, counts).astype(np.int64) + noise


def _as_measured(
    config: Config,
    histograms: dict[str, LevelHistograms],
    level: str,
    geocode: str,
    queries: list[Query],
) -> Config:
    """``config`` with the single-child bypass the run applied (from the input's geounits,
    as the run found it; none with a geography file's own codes). UserError where the
    bypass measured one of ``queries`` below ``level`` instead."""
    if all(lv.parents is None for lv in histograms.values()):
        config = config.with_chain(chain_of(count_geounits(histograms), config.geography.names))
    for query in queries:
        home = config.measured.home[(level, query.name)]
        if home != level:
            raise UserError(
                f"{level} {geocode or '(the root)'} has no measurement of {query.name}: "
                f"its level and the one below hold one geounit each, so the query was "
                f"measured once, at {home} (the certificate's privacy.bypassed); expand "
                f"{home} instead"
            )
    return config


def expand_geounit(
    spark: SparkSession,
    output: str,
    input_dir: str,
    level: str,
    geocode: str,
    query: str | None = None,
) -> list[Expanded]:
    """Every row of each query (or of ``query``) of one geounit, checked against the rows
    its NMF holds."""
    config = load_run_config(spark, output)
    if config.seed is None:
        raise UserError(NO_KEY.format(output=output))
    if not config.file.strategy.sparse:
        raise UserError(f"{output} is a dense run: its nmf/ holds every row already")
    if level not in config.queries:
        raise UserError(f"level {level!r} is not one of the run's: {', '.join(config.queries)}")
    queries = sorted(config.queries[level], key=lambda q: q.name)
    if query is not None:
        queries = [q for q in queries if q.name == query]
        if not queries:
            names = ", ".join(q.name for q in config.queries[level])
            raise UserError(f"query {query!r} is not measured at {level}: {names}")
    histograms = read_histograms(spark, config, input_dir)
    config = _as_measured(config, histograms, level, geocode, queries)
    measured = config.measured
    frame = histograms[level].frame
    found = frame.filter(F.col("geocode") == geocode).select("cells", "counts").collect()
    cells = np.asarray(found[0]["cells"] if found else [], dtype=np.int64)
    counts = np.asarray(found[0]["counts"] if found else [], dtype=np.int64)
    nmf = read_nmf(spark, f"{output.rstrip('/')}/nmf")
    published = {
        r["query"]: r
        for r in nmf.filter((F.col("level") == level) & (F.col("geocode") == geocode)).collect()
    }
    if not found and not published:
        raise UserError(f"{output} has no geounit {geocode!r} at {level}")
    expanded = []
    for q in queries:
        values = expand_query(config, level, geocode, cells, counts, q)
        row = published.get(q.name)
        held = np.asarray(row["rows"] if row and row["rows"] is not None else [], np.int64)
        if row is not None and values[held].tolist() != list(row["values"]):
            raise UserError(
                f"the recomputed answers of {q.name} at {level} {geocode} differ from the "
                f"NMF's: is {input_dir} this run's input?"
            )
        variance = measured.sigma2(level, q.name)
        expanded.append(Expanded(q, variance, values, held.size))
    return expanded


def write_expanded(expanded: list[Expanded], level: str, geocode: str, path: str) -> None:
    """The rows as an NMF file (``rows`` null: every row), which ``read_nmf`` reads."""
    n = len(expanded)
    sizes = np.array([e.values.size for e in expanded], dtype=np.int64)
    offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32))
    flat = np.concatenate([e.values for e in expanded]) if n else np.zeros(0, np.int64)
    table = pa.Table.from_arrays(
        [
            pa.array([level] * n),
            pa.array([geocode] * n),
            pa.array([e.query.name for e in expanded]),
            pa.ListArray.from_arrays(offsets, pa.array(flat), type=NMF_ARROW.field("values").type),
            pa.array([float(e.variance) for e in expanded], pa.float64()),
            pa.array([str(e.variance) for e in expanded]),
            pa.nulls(n, NMF_ARROW.field("rows").type),
        ],
        schema=NMF_ARROW,
    )
    pq.write_table(table, path, compression="zstd")


def render(expanded: list[Expanded], level: str, geocode: str, out: str | None) -> str:
    lines = [f"{level} {geocode}: every row's noisy answer, recomputed from the run's key"]
    for e in expanded:
        lines.append(
            f"  {e.query.name:<40} {e.values.size:>9,} rows ({e.held:,} held by nmf/, "
            f"all equal); total {int(e.values.sum()):,}"
        )
    lines.append(f"written to {out}" if out else "(--out FILE writes the values as an NMF file)")
    return "\n".join(lines)


def nmf_expand_body(
    output: str,
    input_dir: str,
    level: str,
    geocode: str,
    query: str | None,
    out: str | None,
    spark: SparkSession,
) -> str:
    """The command: expand, write ``out`` (Parquet) where given, and the summary to print."""
    expanded = expand_geounit(spark, output, input_dir, level, geocode, query)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_expanded(expanded, level, geocode, out)
    return render(expanded, level, geocode, out)
