"""``das design spine``'s files: the input's block list and the targets in, the spine out.

The blocks come from the input's geography file (``geography.parquet``: every block,
populated or not, with any level codes of its own) or, without one, from the blocks the
units table names. Only the block list is read, never a count: the spine is public
geography built from public geography. The written file is a geography file
(docs/input.md) that a run takes with ``[input] geography``: the input file's columns as
they were and ``block_group`` redefined; the blocks keep their GEOIDs, so the MDF still
tabulates to the standard block groups and tracts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from das.design.spine import BlockTable
from das.errors import UserError

GEOGRAPHY_FILE = "geography.parquet"
TRACT, BLOCK_GROUP = "tract", "block_group"
#: Joins the targets a block lies in into its key (a character no target name holds).
KEY_SEPARATOR = "\x1f"
SHOWN = 5


def _read_parquet(path: Path, what: str, columns: list[str] | None = None) -> pd.DataFrame:
    try:
        return pq.read_table(path, columns=columns).to_pandas()
    except (OSError, pa.ArrowInvalid, KeyError) as exc:
        raise UserError(f"{what} {path}: not a readable Parquet file ({exc})") from None


def input_blocks(input_dir: Path) -> tuple[pd.DataFrame, str]:
    """Every block of the input with the geography file's own columns, and where they
    came from: the geography file, else the units table's distinct GEOIDs."""
    if not input_dir.is_dir():
        raise UserError(f"--input {input_dir} is not a directory (expected an input with "
                        f"{GEOGRAPHY_FILE} or units.parquet)")  # fmt: skip
    geography = input_dir / GEOGRAPHY_FILE
    if geography.exists():
        frame = _read_parquet(geography, "geography file")
        if "geoid" not in frame.columns:
            raise UserError(f"{geography}: no column 'geoid': the geography lists blocks by GEOID")
        return _checked_geoids(frame, str(geography)), str(geography)
    units, path = _units_geoids(input_dir)
    return _checked_geoids(units.drop_duplicates("geoid"), path), path


def _units_geoids(input_dir: Path) -> tuple[pd.DataFrame, str]:
    """The units table's geoid column and the table's path."""
    parquet, csv = input_dir / "units.parquet", input_dir / "units.csv"
    if parquet.exists():
        return _read_parquet(parquet, "units table", ["geoid"]), str(parquet)
    if not csv.exists():
        raise UserError(
            f"--input {input_dir} has neither {GEOGRAPHY_FILE} nor units.parquet/units.csv: "
            "the spine needs the input's block list"
        )
    options = pacsv.ConvertOptions(column_types={"geoid": pa.string()}, include_columns=["geoid"])
    try:
        return pacsv.read_csv(csv, convert_options=options).to_pandas(), str(csv)
    except (OSError, pa.ArrowInvalid, KeyError) as exc:
        raise UserError(
            f"units table {csv}: not a readable CSV file with a geoid column ({exc})"
        ) from None


def _checked_geoids(frame: pd.DataFrame, path: str) -> pd.DataFrame:
    frame = frame.copy()
    if frame["geoid"].isna().any():
        raise UserError(f"{path}: {int(frame['geoid'].isna().sum())} block(s) with no geoid")
    frame["geoid"] = frame["geoid"].astype(str)
    bad = frame.loc[~frame["geoid"].str.fullmatch(r"[0-9]{15}"), "geoid"]
    if len(bad):
        raise UserError(
            f"{path}: {len(bad)} geoid(s) not a 15-digit block GEOID, e.g. {bad.iloc[0]!r} "
            "(run `das check` on the input)"
        )
    duplicated = frame.loc[frame["geoid"].duplicated(), "geoid"]
    if len(duplicated):
        raise UserError(f"{path}: geoid {duplicated.iloc[0]} listed more than once")
    return frame.sort_values("geoid", ignore_index=True)


def read_targets(path: Path, geoids: pd.Series) -> pd.DataFrame:
    """The (geoid, target) pairs of the targets file, each once; refused unless every
    geoid is a block of the input."""
    if not path.exists():
        raise UserError(
            f"--targets {path} does not exist (a Parquet file with columns geoid, target)"
        )
    frame = _read_parquet(path, "--targets")
    missing = [c for c in ("geoid", "target") if c not in frame.columns]
    if missing:
        raise UserError(
            f"--targets {path}: no column {', '.join(repr(c) for c in missing)} (expected "
            "geoid, a block GEOID, and target, the name of the area it lies in)"
        )
    frame = frame[["geoid", "target"]]
    nulls = frame.isna().any(axis=1)
    if nulls.any():
        row = int(nulls.to_numpy().nonzero()[0][0])
        raise UserError(
            f"--targets {path}: row {row} has no geoid or no target; every row needs both"
        )
    frame = frame.astype(str).drop_duplicates(ignore_index=True)
    unknown = frame.loc[~frame["geoid"].isin(geoids), "geoid"].drop_duplicates()
    if len(unknown):
        shown = ", ".join(unknown.iloc[:SHOWN])
        raise UserError(
            f"--targets {path}: {len(unknown)} geoid(s) not a block of the input, e.g. {shown} "
            "(the targets must list blocks of the input's geography)"
        )
    return frame


def block_table(blocks: pd.DataFrame, membership: pd.DataFrame) -> BlockTable:
    """The spine's view of the blocks: tract, standard block group, target key."""
    keys = (
        membership.sort_values(["geoid", "target"])
        .groupby("geoid")["target"]
        .agg(KEY_SEPARATOR.join)
    )
    geoid = blocks["geoid"]
    frame = pd.DataFrame(
        {
            "geoid": geoid,
            "tract": _column(blocks, TRACT, geoid.str[:11]),
            "standard": _column(blocks, BLOCK_GROUP, geoid.str[:12]),
            "key": geoid.map(keys).fillna("").to_numpy(),
        }
    )
    coded = blocks.drop(columns=[c for c in ("geoid", BLOCK_GROUP) if c in blocks.columns])
    return BlockTable(frame, coded)


def _column(blocks: pd.DataFrame, name: str, default: pd.Series) -> pd.Series:
    return blocks[name].astype(str) if name in blocks.columns else default


def check_out(out: Path) -> None:
    """The spine goes to a new file in an existing directory."""
    if out.exists():
        raise UserError(f"--out {out} already exists: remove it or name a new file")
    if not out.parent.is_dir():
        raise UserError(f"--out {out}: directory {out.parent} does not exist")
    if out.suffix != ".parquet":
        raise UserError(f"--out {out}: expected a .parquet file name")


def write_spine(out: Path, table: BlockTable, block_groups: np.ndarray) -> None:
    """The geography file: geoid, the input file's other columns, the new block_group."""
    frame = pd.DataFrame({"geoid": table.frame["geoid"].to_numpy()})
    for name in table.coded.columns:
        frame[name] = table.coded[name].to_numpy()
    frame[BLOCK_GROUP] = block_groups
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out)
