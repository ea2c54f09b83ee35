"""``das nmf``'s parsers and dispatch, kept apart from ``das.job.nmf_expand`` so that the
command line starts without Spark and numba (``das --help`` imports this)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_nmf_arguments(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    add_command: Callable[..., argparse.ArgumentParser],
) -> None:
    """``das nmf``'s parsers; ``add_command`` makes a (sub)command as the cli does."""
    nmf = add_command(commands, "nmf", "work with a run's noisy measurement file")
    actions = nmf.add_subparsers(dest="action", required=True)
    expand = add_command(
        actions,
        "expand",
        "every row of a geounit's noisy answers in a sparse test run (confidential)",
        "Recompute every row of a geounit's noisy answers in a sparse run: the rows its nmf/ "
        "holds (checked equal) and the ones it does not, each the true answer plus the row's "
        "keyed noise, exactly what a dense measurement would have drawn. Needs the run's "
        "input and its noise key: a test run's key comes from its seed; a production run's "
        "was never stored, so it cannot be expanded.",
    )
    expand.add_argument("output", help="the run's output directory (nmf/, run.json)")
    expand.add_argument("--input", required=True, help="the run's input directory")
    expand.add_argument(
        "--level", required=True, help="the geounit's level, as the config names it"
    )
    expand.add_argument("--geocode", required=True, help="the geounit's code at that level")
    expand.add_argument("--query", help="one query (default: every query of the level)")
    expand.add_argument("--out", metavar="FILE", help="write the values as an NMF Parquet file")
    expand.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE",
        help="a Spark setting (repeatable)",
    )  # fmt: skip


def nmf_command(args: argparse.Namespace) -> None:
    from das.job.nmf_expand import nmf_expand_body
    from das.spark.session import parse_spark_conf, spark_session
    from das.spec.config import SparkSection

    spark = spark_session(SparkSection(), "das nmf expand", parse_spark_conf(args.conf))
    print(
        nmf_expand_body(
            args.output, args.input, args.level, args.geocode, args.query, args.out, spark
        )
    )
