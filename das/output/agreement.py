"""The other run a run agrees with (``postprocess.agree_with``), read from its public files,
and the validator's check that every block agrees with it exactly.

The 2020 DHC persons product agreed with the P.L. 94-171 microdata: each block's
(GQ type, voting age, Hispanic, CENRACE) counts are the same in both, so either product's
records give the same P.L. 94-171 tables. Both MDFs are public, so the check is too.
"""

from __future__ import annotations

import json
import os

import numpy as np

from das.errors import UserError
from das.output.tabulate import mdf_blocks, mdf_histogram
from das.spec.config import Config
from das.spec.schema import Schema, load_schema


def agreed_schema(config: Config) -> Schema:
    """The other run's schema, checked against ``agree_on``: as many cells as its rows."""
    other = config.file.postprocess.agree_with
    assert other is not None and config.file.postprocess.agree_on is not None
    record = os.path.join(other, "run.json")  # its run.schema names its schema
    if not os.path.isfile(record) or not os.path.isdir(os.path.join(other, "mdf")):
        raise UserError(
            f"postprocess.agree_with: {other} is not the output directory of a finished run "
            "(no run.json or no mdf/)"
        )
    with open(record, encoding="utf-8") as file:
        name = json.load(file)["run"]["schema"]
    schema = load_schema(name)
    query = config.schema.query(config.file.postprocess.agree_on)
    if query.size != schema.size:
        raise UserError(
            f"postprocess.agree_on: {query.name!r} has {query.size:,} rows, but {other} is a "
            f"run of schema {name!r}, whose histogram has {schema.size:,} cells"
        )
    return schema


def check_agreement(output: str, config: Config) -> list[str]:
    """Every block's counts in the other product's cells, from this run's MDF, equal the
    other run's exactly (none where the run agrees with nothing)."""
    other = config.file.postprocess.agree_with
    if other is None:
        return []
    schema = agreed_schema(config)
    mine, theirs = os.path.join(output, "mdf"), os.path.join(other, "mdf")
    blocks = np.union1d(mdf_blocks(mine), mdf_blocks(theirs))
    differ = (mdf_histogram(mine, schema, blocks) - mdf_histogram(theirs, schema, blocks)).tocoo()
    wrong = np.flatnonzero(differ.data)
    if not wrong.size:
        return []
    first = wrong[0]
    return [
        f"{wrong.size:,} block cells of schema {schema.name!r} differ from {other}'s "
        f"(agree_with), e.g. block {blocks[differ.row[first]]} cell {differ.col[first]}: "
        f"{int(differ.data[first]):+d}"
    ]
