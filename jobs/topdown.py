"""spark-submit entry point for a TopDown run.

    spark-submit --master spark://host:7077 jobs/topdown.py CONFIG --input DIR --output DIR \
        [--seed S] [--set key=value ...] [--resume]

Takes the same arguments as ``das run``; the master and executor settings come from
spark-submit, never from this file.
"""

import sys

from das.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
