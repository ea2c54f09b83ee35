"""spark-submit entry point for a TopDown run.

    spark-submit --master spark://host:7077 jobs/topdown.py CONFIG --input DIR --output DIR \
        [--confidential DIR] [--seed S] [--set key=value ...] [--conf key=value ...] \
        [--resume] [--dry-run] [-v | -q]

Takes every argument of ``das run``; the master and executor settings come from
spark-submit (or ``--conf``), never from this file. ``das`` must be importable on the
driver and the executors: installed there, shipped in a packed environment
(``--archives``), or, when its dependencies are installed, as ``--py-files dist/das.zip``
(``make dist``); see docs/cluster.md.
"""

import sys
from collections.abc import Sequence

from das.job import cli


def main(argv: Sequence[str] | None = None) -> int:
    """``das run`` with this script's arguments."""
    return cli.main(["run", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
