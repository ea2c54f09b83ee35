"""spark-submit entry point for a TopDown run.

    spark-submit --master spark://host:7077 jobs/topdown.py CONFIG --input DIR --output DIR \
        [--confidential DIR] [--seed S] [--set key=value ...] [--resume]

Takes the same arguments as ``das run``; the master and executor settings come from
spark-submit, never from this file. ``das`` must be importable on the driver and the
executors: installed there, shipped in a packed environment (``--archives``), or, when its
dependencies are installed, as ``--py-files dist/das.zip`` (``make dist``); see
docs/cluster.md.
"""

import sys

from das.job.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
