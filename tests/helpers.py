"""Small, valid contract inputs built in memory, for tests that need exact control."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from das.input.contract import UNITS
from das.output.microdata import expand_blocks
from das.spec.config import Config, load_config


def tiny_input(seed: int = 0, blocks: int = 12) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Persons and units over ``blocks`` blocks in two counties, satisfying every rule."""
    rng = np.random.default_rng(seed)
    geoids = [f"44{c:03d}{t:06d}{b:04d}" for c in (1, 3) for t in (100, 200)
              for b in (1000, 1001, 2000)][:blocks]
    units, persons = [], []
    for geoid in geoids:
        for _ in range(rng.integers(0, 4)):
            unit_id = len(units) + 1
            residents = int(rng.integers(0, 4))
            units.append((unit_id, geoid, 0, residents > 0))
            persons += [(unit_id, geoid, 0) for _ in range(residents)]
        if rng.random() < 0.3:
            gqtype = int(rng.integers(1, 8))
            unit_id = len(units) + 1
            units.append((unit_id, geoid, gqtype, True))
            persons += [(unit_id, geoid, gqtype) for _ in range(rng.integers(1, 5))]
    unit_frame = pd.DataFrame(units, columns=list(UNITS.names))
    n = len(persons)
    gq = np.array([p[2] for p in persons])
    age = np.where(gq == 3, rng.integers(18, 100, n), rng.integers(0, 100, n))
    person_frame = pd.DataFrame({
        "person_id": np.arange(1, n + 1, dtype=np.int64),
        "unit_id": np.array([p[0] for p in persons], dtype=np.int64),
        "geoid": [p[1] for p in persons],
        "age": age.astype(np.int32),
        "hispanic": rng.random(n) < 0.2,
        "cenrace": rng.integers(1, 64, n).astype(np.int32),
    })
    unit_frame["unit_id"] = unit_frame["unit_id"].astype(np.int64)
    unit_frame["gqtype"] = unit_frame["gqtype"].astype(np.int32)
    return person_frame, unit_frame


#: Config overrides that read the CSV files ``write_input(..., fmt="csv")`` writes.
CSV_INPUT = ("input.format='csv'", "input.persons='persons.csv'", "input.units='units.csv'")


def write_input(directory: Path, persons: pd.DataFrame, units: pd.DataFrame, fmt: str = "parquet") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        persons.to_csv(directory / "persons.csv", index=False)
        units.to_csv(directory / "units.csv", index=False)
    else:
        persons.to_parquet(directory / "persons.parquet", index=False)
        units.to_parquet(directory / "units.parquet", index=False)
    return directory


def file_tree(root: Path) -> dict[str, bytes | None]:
    """Every file's bytes (None for a directory) under root: equal before and after a
    command that must write nothing and remove nothing."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


def exit_code(call: Callable[[], int]) -> int:
    """A command's exit code, whether it returns it or argparse exits."""
    try:
        return call()
    except SystemExit as exc:  # argparse
        return int(exc.code or 0)


#: The demo job several test files share (tests/conftest.py's demo_input and demo_run): one
#: shuffle partition per core of local[2] and of the 2-core test cluster; WARN shows Spark's
#: lost-task and lost-executor lines, which the cluster's fault tests check.
DEMO_SEED = 21
ROOT = Path(__file__).resolve().parents[1]  # as tests/conftest.py's, which imports this module
DEMO_SETTINGS = ("--set", "spark.shuffle_partitions=2", "--set", "spark.log_level=WARN")


def job_env() -> dict[str, str]:
    """The environment of a job launched as a process: this interpreter on both sides."""
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",  # the driver's ports and UI on loopback only
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=str(ROOT),
    )
    return env


DEMO = ROOT / "configs" / "demo.toml"


def demo_job_args(input_dir: Path, output: Path, seed: int | None = DEMO_SEED) -> list[str]:
    """The arguments `das run` and jobs/topdown.py share for the shared demo job (no --seed
    when ``seed`` is None: production mode refuses one)."""
    seeded = [] if seed is None else ["--seed", str(seed)]
    return [str(DEMO), "--input", str(input_dir), "--output", str(output), *seeded, *DEMO_SETTINGS]


def demo_config(*overrides: str, seed: int | None = DEMO_SEED) -> Config:
    """The shared demo job's configuration, as ``demo_job_args`` gives it to a process,
    with ``overrides`` (``key=value``) after its settings."""
    return load_config(DEMO, [*DEMO_SETTINGS[1::2], *overrides], seed=seed)


def file_stamps(directory: Path) -> dict[str, int]:
    """Each file's modification time (ns) under ``directory``: a file written again, even
    with the same bytes, has a new one (how a test tells that noise was not drawn again
    where a seed would draw the same)."""
    return {p.relative_to(directory).as_posix(): p.stat().st_mtime_ns for p in directory.rglob("*")}


def topdown_command(master: str, *spark_conf: str) -> list[str]:
    """``spark-submit [--conf ...] jobs/topdown.py`` on ``master``; the job's arguments follow."""
    confs = [part for conf in spark_conf for part in ("--conf", conf)]
    return [str(Path(sys.executable).parent / "spark-submit"), "--master", master, *confs,
            str(ROOT / "jobs" / "topdown.py")]  # fmt: skip


def assert_known_zeros(
    config: Config, input_dir: Path, output: Path, detailed: pd.DataFrame | None = None
) -> None:
    """invariants/ publishes each block's units as the input's units table has them
    (whether it has a housing unit, then its occupied facilities of each type; zeros for a
    block without units); in estimates/, a block's `hhgq` cells of a type it has none of are
    0 with variance 0, and the others measured. ``detailed``: the blocks' detailed rows
    (which estimates/ leaves out: `das estimate --level block`), whose cells of a type the
    block has none of, and of the structural zero (no one under 18 in a nursing facility),
    are 0 with variance 0, every other cell measured; most cells are such zeros."""
    units = pd.read_parquet(input_dir / "units.parquet")
    invariants = pq.read_table(output / "invariants").to_pandas()
    rows = invariants[invariants["query"] == "units"]
    assert set(rows["level"]) == {"block"}
    published = {g: list(v) for g, v in zip(rows["geocode"], rows["values"], strict=True)}
    counted = units[(units["gqtype"] == 0) | units["occupied"].astype(bool)]
    per_type = counted.groupby(["geoid", "gqtype"]).size()
    assert set(units["geoid"]) <= set(published)
    expected = {g: [int(per_type.get((g, t), 0)) for t in range(8)] for g in published}
    for values in expected.values():
        values[0] = int(values[0] > 0)  # whether there is a housing unit, not how many
    assert published == expected

    estimates = pq.read_table(output / "estimates").to_pandas()
    hhgq_rows = estimates[(estimates["level"] == "block") & (estimates["query"] == "hhgq")]
    assert set(hhgq_rows["geocode"]) == set(published)
    for row in hhgq_rows.itertuples():
        live = np.asarray(published[row.geocode]) > 0  # the hhgq cells: the units' order
        assert np.all(row.estimates[~live] == 0.0) and np.all(row.variances[~live] == 0.0)
        assert np.all(row.variances[live] > 0.0)
    if detailed is None:
        return
    assert set(detailed["geocode"]) == set(published)
    schema = config.schema
    hhgq = schema.cell_codes(np.arange(schema.size))[:, schema.axis("hhgq")]
    zeros = 0
    for row in detailed.itertuples():
        live = (np.asarray(published[row.geocode])[hhgq] > 0) & ~schema.structural_zero_mask
        assert np.all(row.estimates[~live] == 0.0) and np.all(row.variances[~live] == 0.0)
        assert not np.signbit(row.estimates[~live]).any()  # 0, not -0
        assert np.all(row.variances[live] > 0.0)
        zeros += int((~live).sum())
    assert zeros > len(detailed) * schema.size // 2


def write_mdf(path, schema, cells_by_block: dict[str, dict[int, int]]) -> None:
    """An MDF as the job lays it out: TABBLKST=../TABBLKCOU=../ files of expanded blocks."""
    for geoid, found in cells_by_block.items():
        records = expand_blocks(
            pa.array([geoid]),
            pa.array([list(found)], pa.list_(pa.int32())),
            pa.array([list(found.values())], pa.list_(pa.int64())),
            schema,
        ).drop_columns(["TABBLKST", "TABBLKCOU"])
        folder = path / f"TABBLKST={geoid[:2]}" / f"TABBLKCOU={geoid[2:5]}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(records, folder / f"part-{geoid}.parquet")


def matched_records(truth: pd.DataFrame, rebuilt: pd.DataFrame, keys: list[str]) -> tuple[int, int]:
    """(persons matched, unique persons matched) of person records (a ``geoid`` column and
    ``keys``), one to one within the block: what ``das audit`` counts, made independently."""
    t = truth.groupby(["geoid", *keys]).size().rename("t")
    r = rebuilt.groupby(["geoid", *keys]).size().rename("r")
    both = pd.concat([t, r], axis=1).fillna(0)
    return int(np.minimum(both["t"], both["r"]).sum()), int(
        ((both["t"] == 1) & (both["r"] >= 1)).sum()
    )
