"""The figures bench.bench_dhc takes from a finished DHC-P run: error per cell against the
input, the noisy measurement file's size and draws, and the agreement with a P.L. 94-171 run.

Accuracy: the input's records and the MDF's records are each counted per block and cell of
the schema (the MDF's cells recovered from its published columns, as ``das tabulate``
does), summed to every level's geounits of the run's tree (``levels/`` and ``geography/``:
every geounit, populated or not), and each figure's query answered from them: its MAE per
cell is the mean over the level's geounits of |protected - true|, cell by cell, then over
the figure's cells. The input is confidential: only these pooled means leave the bench.

Draws: a sparse run (``strategy.sparse``) measures each geounit only on the query rows its
parent's protected solution can reach, and ``nmf/`` says which (``rows``; null: every row),
so the values a level holds are the noise draws made for it; a dense draw would be every
row of every query measured there (1,903,289 per DHC-P geounit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from das.output.geounits import Hierarchy, hierarchy, run_blocks, run_parents
from das.output.microdata import read_microdata_table
from das.output.tables import histogram
from das.output.tabulate import BLOCK_PARTS, grouped
from das.spec.geography import Geography
from das.spec.schema import Query, Schema


# ---- what is compared -----------------------------------------------------------------------
@dataclass(frozen=True)
class Figure:
    """A figure users read: the MAE per cell of some cells of a query of the schema, with
    the Census Bureau's published MAE per cell for the same cells where it has one, by level
    (2010 data at the DHC production settings: ../shared/DESIGN.md, "DHC-P")."""

    label: str
    query: str
    #: The query's cells the figure pools (None: all of them).
    cells: tuple[int, ...] | None = None
    census: Mapping[str, float] = field(default_factory=dict)

    def value(self, per_cell: np.ndarray) -> float:
        """The figure from the query's MAE of every cell: their mean over ``cells``."""
        chosen = per_cell if self.cells is None else per_cell[list(self.cells)]
        return float(np.mean(chosen))


#: The Bureau's county figures for age 0-17, 18-64, 65+ and race alone (White, Black, AIAN,
#: Asian, NHPI, SOR, two or more), cell by cell, in the schema's cell order.
CENSUS_COUNTY_AGE = (10.10, 13.05, 12.76)
CENSUS_COUNTY_RACE = (19.5, 13.6, 6.4, 8.3, 4.6, 13.4, 18.6)
#: P12's 23 age groups (age_p12_groups); sex is the query's first factor (male first).
P12_GROUPS = 23
P12_25_29 = 8
RACES = ("White", "Black", "AIAN", "Asian", "NHPI", "SOR", "two or more")

#: What the table of levels shows (issue 56): the total, sex by P12's age groups, broad age,
#: age by relationship (households) and major GQ type, the GQ population by major type (the
#: seven GQ cells of hhgq_8, households left out), Hispanic origin and race alone.
FIGURES = (
    Figure("total population", "total", census={"county": 1.86, "tract": 1.94}),
    Figure("sex x age (P12's 23 groups)", "sex*age_p12_groups", census={"tract": 2.54}),
    Figure(
        "age 0-17, 18-64, 65+",
        "age_18_64_116",
        census={"county": round(float(np.mean(CENSUS_COUNTY_AGE)), 3)},
    ),
    Figure(
        "relationship or GQ type (25) x age 0-17, 18-64, 65+",
        "relship_and_eight_level_GQ*age_18_64_116",
    ),
    Figure("GQ population by major type (7)", "hhgq_8", cells=tuple(range(1, 8))),
    Figure("Hispanic", "hispanic", cells=(1,), census={"county": 23.4}),
    Figure(
        "race alone (6) and two or more",
        "race_alone",
        census={"county": round(float(np.mean(CENSUS_COUNTY_RACE)), 3)},
    ),
)

#: The Bureau's figures cell by cell (or by sex), beside ours at their level.
CENSUS_CELLS = (
    Figure("male x age (P12)", "sex*age_p12_groups", tuple(range(P12_GROUPS)), {"tract": 2.51}),
    Figure(
        "female x age (P12)",
        "sex*age_p12_groups",
        tuple(range(P12_GROUPS, 2 * P12_GROUPS)),
        {"tract": 2.58},
    ),
    Figure("male 25-29", "sex*age_p12_groups", (P12_25_29,), {"tract": 2.73}),
    *(
        Figure(f"age {name}", "age_18_64_116", (i,), {"county": mae})
        for i, (name, mae) in enumerate(
            zip(("0-17", "18-64", "65+"), CENSUS_COUNTY_AGE, strict=True)
        )
    ),
    *(
        Figure(f"{name} alone" if i < 6 else name, "race_alone", (i,), {"county": mae})
        for i, (name, mae) in enumerate(zip(RACES, CENSUS_COUNTY_RACE, strict=True))
    ),
)


def queries(schema: Schema) -> dict[str, Query]:
    """Every query the figures need, by name (the schema's canonical names)."""
    found = {}
    for figure in (*FIGURES, *CENSUS_CELLS):
        query = schema.query(figure.query)
        found[figure.query] = query
    return found


# ---- histograms: input and MDF, per block of the run ---------------------------------------
def input_cells(schema: Schema, persons: pa.Table) -> np.ndarray:
    """Each input record's cell of ``schema`` from its source columns (the recodes
    identity, bool and offset; the DHC-P schema needs no other)."""
    codes = []
    for attribute in schema.attributes:
        if attribute.recode not in ("identity", "bool", "offset"):
            raise ValueError(f"attribute {attribute.name}: recode {attribute.recode} not read here")
        values = persons.column(attribute.source[0]).to_numpy(zero_copy_only=False)
        code = values.astype(np.int64) - (attribute.offset if attribute.recode == "offset" else 0)
        if code.size and (code.min() < 0 or code.max() >= attribute.size):
            raise ValueError(f"attribute {attribute.name}: a code outside 0..{attribute.size - 1}")
        codes.append(code)
    return np.ravel_multi_index(tuple(codes), schema.shape)


def block_histogram(
    blocks: np.ndarray, geoids: np.ndarray, cells: np.ndarray, size: int
) -> sp.csr_matrix:
    """The (block x cell) counts of records (``geoids``, ``cells``), rows in the order of
    ``blocks`` (sorted); refuses a record in a block the run does not have."""
    rows = np.searchsorted(blocks, geoids)
    if (rows >= blocks.size).any() or (blocks[rows] != geoids).any():
        raise ValueError("a record in a block the run does not list")
    return histogram(rows, cells, np.ones(rows.size, np.int64), blocks.size, size)


def input_histogram(input_dir: Path, schema: Schema, blocks: np.ndarray) -> sp.csr_matrix:
    """The input's (block x cell) histogram (confidential: it stays in this process)."""
    names = ["geoid", *(a.source[0] for a in schema.attributes)]
    persons = pq.read_table(input_dir / "persons.parquet", columns=names)
    geoids = np.asarray(persons.column("geoid").to_numpy(zero_copy_only=False), dtype=str)
    return block_histogram(blocks, geoids, input_cells(schema, persons), schema.size)


def run_tree(run: Path, geography: Geography) -> Hierarchy:
    """The run's geounits at every level: every block of ``levels/`` (populated or not)."""
    blocks = run_blocks(str(run), geography.block.name)
    if blocks is None:
        raise SystemExit(f"{run}: no levels/{geography.block.name}/ checkpoint")
    return hierarchy(geography, blocks, run_parents(str(run)))


def attribute_levels(schema: Schema, attribute: str, table: pa.Table) -> np.ndarray:
    """Each MDF record's level of ``attribute``, from all the MDF columns of it together
    (DHC-P's relgq needs three: GQTYPE, RELSHIP and LIVE_ALONE; no one column tells its 42
    levels apart, so ``das tabulate``'s one-column decoding cannot be used here)."""
    columns = [c for c in schema.output if c.attribute == attribute]
    size = schema.attribute(attribute).size
    level_key = np.zeros(size, dtype=np.int64)
    record_key = np.zeros(table.num_rows, dtype=np.int64)
    for column in columns:
        codes = np.unique(column.values)
        values = table.column(column.name).to_numpy(zero_copy_only=False).astype(np.int64)
        position = np.searchsorted(codes, values).clip(0, codes.size - 1)
        if (codes[position] != values).any():
            raise ValueError(f"column {column.name}: a code the schema does not publish")
        level_key = level_key * codes.size + np.searchsorted(codes, column.values)
        record_key = record_key * codes.size + position
    if np.unique(level_key).size != size:
        raise ValueError(f"the MDF's columns of {attribute} do not tell its levels apart")
    order = np.argsort(level_key)
    found = np.searchsorted(level_key[order], record_key).clip(0, size - 1)
    if (level_key[order][found] != record_key).any():
        raise ValueError(f"a record whose codes of {attribute} are no level's")
    return order[found]


def mdf_cells(schema: Schema, table: pa.Table) -> np.ndarray:
    """Each MDF record's cell of ``schema``."""
    codes = [attribute_levels(schema, a.name, table) for a in schema.attributes]
    return np.ravel_multi_index(tuple(codes), schema.shape)


def protected_histogram(run: Path, schema: Schema, tree: Hierarchy) -> sp.csr_matrix:
    """The MDF's (block x cell) histogram, rows in the order of the run's blocks."""
    names = sorted({c.name for c in schema.output})
    table = read_microdata_table(str(run / "mdf"), [*BLOCK_PARTS, *names])
    geoid = pc.binary_join_element_wise(*(table.column(n) for n in BLOCK_PARTS), "")
    geoids = np.asarray(geoid.to_numpy(zero_copy_only=False), dtype=str)
    return block_histogram(tree.blocks, geoids, mdf_cells(schema, table), schema.size)


# ---- errors per cell ------------------------------------------------------------------------
def cell_maes(truth: sp.csr_matrix, protected: sp.csr_matrix, query: Query) -> np.ndarray:
    """The MAE of each of ``query``'s cells over the geounits (rows) of two (geounit x
    schema cell) histograms: sum over geounits of |protected - true| / geounits."""
    if truth.shape != protected.shape:
        raise ValueError(f"histograms of shapes {truth.shape} and {protected.shape}")
    if truth.shape[0] == 0:
        raise ValueError("no geounits")
    difference = (protected - truth) @ query.matrix.T
    return np.asarray(abs(difference).sum(axis=0)).ravel() / truth.shape[0]


def level_maes(
    tree: Hierarchy,
    truth: sp.csr_matrix,
    protected: sp.csr_matrix,
    wanted: Mapping[str, Query],
) -> dict[str, dict[str, np.ndarray]]:
    """level -> query -> the MAE of each cell, from the two block histograms."""
    found = {}
    for grouping in tree.levels:
        true, mine = grouped(truth, grouping), grouped(protected, grouping)
        found[grouping.name] = {name: cell_maes(true, mine, q) for name, q in wanted.items()}
    return found


def figure_values(
    maes: Mapping[str, Mapping[str, np.ndarray]], levels: Sequence[str]
) -> dict[str, dict[str, float]]:
    """FIGURES' values: label -> level -> MAE per cell."""
    return {f.label: {lv: f.value(maes[lv][f.query]) for lv in levels} for f in FIGURES}


def census_cell_values(maes: Mapping[str, Mapping[str, np.ndarray]]) -> list[dict[str, object]]:
    """CENSUS_CELLS beside ours: level, figure, ours, the Census's (at the levels the run has)."""
    return [
        {"level": level, "figure": f.label, "mae": f.value(maes[level][f.query]), "census": c}
        for f in CENSUS_CELLS
        for level, c in f.census.items()
        if level in maes
    ]


def metrics_check(
    metrics: pd.DataFrame, maes: Mapping[str, Mapping[str, np.ndarray]]
) -> dict[str, object]:
    """Our pooled MAE of each whole query against the run's own metrics.csv (protected,
    every bin): the pairs compared and the largest absolute difference."""
    rows = metrics[
        (metrics["source"] == "protected")
        & (metrics["size_bin"] == "all")
        & (metrics["diversity_bin"] == "all")
    ]
    differences = []
    for level, query, mae in rows[["level", "query", "mae"]].itertuples(index=False):
        if level in maes and query in maes[level]:
            differences.append(abs(float(np.mean(maes[level][query])) - float(mae)))
    return {"pairs": len(differences), "max_abs_difference": max(differences, default=None)}


# ---- the noisy measurement file -------------------------------------------------------------
def nmf_values(nmf: Path) -> pd.DataFrame:
    """Per level and geocode of ``nmf/``, the noisy values it holds (list lengths summed
    over the geounit's queries), read in batches."""
    parts = []
    for path in sorted(nmf.glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(columns=["level", "geocode", "values"]):
            lengths = pc.list_value_length(batch.column("values")).to_numpy(zero_copy_only=False)
            parts.append(
                pd.DataFrame(
                    {
                        "level": batch.column("level").to_pylist(),
                        "geocode": batch.column("geocode").to_pylist(),
                        "values": np.asarray(lengths, dtype=np.int64),
                    }
                )
            )
    if not parts:
        return pd.DataFrame({"level": [], "geocode": [], "values": []})
    return pd.DataFrame(
        pd.concat(parts).groupby(["level", "geocode"], as_index=False)["values"].sum()
    )


def draws(
    values: pd.DataFrame, geounits: Mapping[str, int], dense: Mapping[str, int]
) -> list[dict[str, object]]:
    """Per level (in ``geounits``' order): its geounits, those with rows in the NMF, the
    values held, their mean and largest per geounit, the dense count per geounit (every
    row of every query measured there) and the mean's share of it."""
    rows = []
    for level, count in geounits.items():
        mine = values.loc[values["level"] == level, "values"]
        total = int(mine.sum())
        mean = total / count if count else 0.0
        rows.append(
            {
                "level": level,
                "geounits": count,
                "measured": int((mine > 0).sum()),
                "values": total,
                "per_geounit": mean,
                "max_per_geounit": int(mine.max()) if len(mine) else 0,
                "dense": dense[level],
                "share_of_dense": mean / dense[level] if dense[level] else None,
            }
        )
    return rows


def directory_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (checksums and markers included)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# ---- agreement with the P.L. 94-171 run -----------------------------------------------------
#: The MDF columns of a P.L. 94-171 cell, in both products' MDFs.
PL_COLUMNS = ("GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE")


def pl_counts(mdf: Path) -> pd.Series:
    """Records per block and P.L. 94-171 cell of an MDF (index: geoid and PL_COLUMNS)."""
    table = read_microdata_table(str(mdf), [*BLOCK_PARTS, *PL_COLUMNS])
    geoid = pc.binary_join_element_wise(*(table.column(n) for n in BLOCK_PARTS), "")
    keyed = pa.table({"geoid": geoid, **{n: table.column(n) for n in PL_COLUMNS}})
    counted = keyed.group_by(["geoid", *PL_COLUMNS]).aggregate([([], "count_all")])
    frame = counted.to_pandas()
    return frame.set_index(["geoid", *PL_COLUMNS])["count_all"].astype(np.int64)


def differing_cells(mine: pd.Series, theirs: pd.Series) -> dict[str, int]:
    """Block x P.L. cells whose counts differ between two ``pl_counts`` (a cell missing on
    one side counts 0 there), the blocks with any, and the cells compared (either side
    nonzero)."""
    both = pd.concat([mine.rename("mine"), theirs.rename("theirs")], axis=1).fillna(0)
    differ = both["mine"] != both["theirs"]
    blocks = both.index.get_level_values("geoid")[differ.to_numpy()]
    return {
        "cells_compared": len(both),
        "cells_differ": int(differ.sum()),
        "blocks_differ": int(pd.unique(blocks).size),
        "persons_mine": int(both["mine"].sum()),
        "persons_theirs": int(both["theirs"].sum()),
    }


def pooled(values: Iterable[float]) -> dict[str, float]:
    """Mean, min and max over seeds."""
    found = list(values)
    return {"mean": float(np.mean(found)), "min": min(found), "max": max(found)}
