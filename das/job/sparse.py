"""A sparse run (``strategy.sparse``): each level measured between the solves, only where
its parent's protected solution can reach.

A child's count is zero wherever its parent's protected count is zero (children add up to
their parent), so the family's problem has variables only on the parent's support and
needs each child's noisy answers only on the query rows that support touches. The parent's
solution is public (a post-processing of the measurements above), so the measurement can
take it as given: it draws the child's noise on those rows alone, from per-row keyed
streams, which are the same rows of the full measurement bit for bit (``das nmf expand``
gives the rest). This is what makes the DHC persons product (1,227,744 cells) tractable:
nothing off a parent's support is drawn, stored or solved.

The order is therefore level by level: measure the root (every row), solve it, then for
each level below, measure its geounits on their parents' supports and solve its families.
Each level's NMF part and checkpoint are written once; a resumed run reuses both.

The single-child bypass (``das.spec.bypass``) holds here as in a dense run: the root's
chain of only children is measured with the root, every row, each shared query once at
the chain's lowest level with the levels' rho summed, and the root's solve fits those
rows as its own (``with_bypassed``). Without it a US-rooted run of one state would spend
DHC-P's largest share, the state's (1.2987 of 4.9622), on a family with nothing to decide.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from das.input.read import LevelHistograms
from das.job.agreement import agreement_frames
from das.job.progress import Progress, phase
from das.postprocess.levels import LevelRun, solve_and_checkpoint, with_bypassed
from das.postprocess.public import read_public
from das.postprocess.report import LevelReport
from das.privacy.generator import Rng
from das.privacy.nmf import read_nmf
from das.privacy.sparse import measure_level_sparse
from das.spark.geocodes import geocode_of
from das.spark.storage import write_text
from das.spec.config import Config
from das.spec.geography import Level

log = logging.getLogger("das.sparse")


def reach_frame(histograms: LevelHistograms, parent: Level, solution: DataFrame) -> DataFrame:
    """(geocode, cells) of every geounit of a level: the schema cells its parent's
    protected solution holds, the only cells where its own count can be nonzero. The
    geounits and their parents are the measurement's (the level's histograms, as the dense
    measurement lists them); the cells are the parent's published solution."""
    children = histograms.frame.select("geocode")
    if histograms.parents is not None:  # the geography file's parents
        children = children.join(histograms.parents, "geocode", "inner")
    else:
        children = children.withColumn("parent", geocode_of("geocode", parent.length))
    support = solution.select(F.col("geocode").alias("parent"), "cells")
    return children.join(support, "parent", "left").select(
        "geocode", F.coalesce("cells", F.array().cast("array<int>")).alias("cells")
    )


def sparse_levels(
    spark: SparkSession,
    config: Config,
    histograms: dict[str, LevelHistograms],
    output: str,
    confidential: str,
    rng: Rng,
    progress: Progress,
    geounits: dict[str, int],
) -> tuple[list[LevelReport], dict[str, DataFrame]]:
    """Every level, root first: measured on its parents' supports, then solved and
    checkpointed. Returns the levels' reports and their solutions. The noisy answers'
    error sums are not taken: a sparse level never draws the dense noise they sum."""
    nmf_path = f"{output}/nmf"
    reports: list[LevelReport] = []
    protected: dict[str, DataFrame] = {}
    parents: DataFrame | None = None
    levels = config.geography.levels
    agreement = agreement_frames(spark, config)
    for index, level in enumerate(levels):
        counter = progress.counter()
        with phase(progress, f"measure {level.name}", geounits[level.name], counter):
            reach = None
            if parents is not None:
                reach = reach_frame(histograms[level.name], levels[index - 1], parents)
            # the root's chain with the root, every row: the root's solve fits its rows
            chain = config.chain if index == 0 else ()
            for name in (level.name, *chain):  # a level measured before is reused
                measure_level_sparse(
                    spark, config, name, histograms[name], reach, rng, nmf_path, counter
                )
        nmf = read_nmf(spark, nmf_path)  # every level measured so far, read back from disk
        facts = read_public(spark, config, output)
        run = LevelRun(
            spark,
            config,
            output,
            nmf,
            with_bypassed(nmf, config, facts),
            facts,
            geounits,
            timings=confidential,
            agreement=agreement,
        )
        parent_count = geounits[levels[index - 1].name] if index else 1
        counter = progress.counter()
        with phase(progress, f"solve {level.name}", parent_count, counter, "parents"):
            parents, report = solve_and_checkpoint(run, index, parents, counter)
        reports.append(report)
        protected[level.name] = parents
        # Spark's cache matches a read of nmf/ by its plan, not by the files it found:
        # left cached, the next level's read_public would list this level's geounits only
        facts.geounits.unpersist()
    write_text(spark, f"{nmf_path}/_SUCCESS", "")  # every level measured: the NMF is whole
    return reports, protected
