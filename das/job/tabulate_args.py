"""The arguments of ``das tabulate`` (``das.job.tabulate``), apart from the command's code so
that ``das --help`` loads none of it."""

from __future__ import annotations

import argparse

HELP = "the P.L. 94-171 tables (P1-P5, H1) of a run, for every geounit and area"
DESCRIPTION = (
    "Write the P.L. 94-171 tables of a finished run (P1-P5 from a persons run, H1 from an "
    "occupancy run) from its public files, one file per table under OUTPUT/tables/: a row per "
    "geounit of every level (and per area of --areas), a column per Census line identifier "
    "(P0010001 ...); lines.csv labels them. No Spark (docs/users.md)."
)


def add_tabulate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output", help="the run's output directory (mdf/, levels/, run.json)")
    parser.add_argument(
        "--areas",
        metavar="FILE",
        help="a block-assignment file (CSV, comma or | separated, or Parquet): a GEOID (or "
        "BLOCKID) column and one column per kind of area, its value the block's area code",
    )
    parser.add_argument(
        "--format", choices=("csv", "parquet"), default="csv", help="the tables' format (csv)"
    )
    parser.add_argument(
        "--input",
        metavar="DIR",
        help="tabulate this confidential input (the run's) instead of the protected microdata, "
        "into <confidential>/tables/ (NOT public; reads it on Spark)",
    )
    parser.add_argument(
        "--confidential",
        metavar="DIR",
        help="the run's confidential directory, with --input (default: <output>-confidential)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write the tables here instead (default: OUTPUT/tables, or <confidential>/tables "
        "with --input; never inside OUTPUT with --input)",
    )
