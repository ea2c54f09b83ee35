"""How well any linear unbiased estimate can know each geounit's total, from a run's files.

    python -m bench.total_bound RUN --input DIR [--config FILE]

The BLUE of a geounit's total is the total of the tree-wide BLUE that the run published
(``estimates/``, query ``total``: every measurement of every geounit, the known zeros and
the exact totals imposed, ``das.estimate``), so its exact variance F gives the expected
MAE of the best linear unbiased estimate, mean(sqrt(2 F / pi)) (a normal error), which no
linear unbiased use of these measurements beats; the protected output can, a little,
with what is not linear (the parent's zeros, nonnegativity). Prints, per level, the
expected MAE, the estimate's MAE against the input and the 90% interval's coverage.
Reads the input for the truth: a benchmark's figures, never a release's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from das.spec.config import load_config

Z90 = 1.6448536269514722


def true_totals(input_dir: str) -> pd.DataFrame:
    """Each block's number of persons (geoid, n), from the input's tables."""
    units = pq.read_table(f"{input_dir}/units.parquet", columns=["unit_id", "geoid"]).to_pandas()
    persons = pq.read_table(f"{input_dir}/persons.parquet", columns=["unit_id"]).to_pandas()
    blocks = persons.merge(units, on="unit_id")
    return blocks.groupby("geoid").size().rename("n").reset_index()


def bound(run: str, input_dir: str, config_path: str) -> pd.DataFrame:
    config = load_config(config_path, overrides=["run.production=false"], seed=1)
    if config.total_invariant_level is None:
        raise SystemExit(f"{config_path}: no invariant total: nothing to root the tree at")
    table = pq.read_table(f"{run}/estimates", filters=[("query", "=", "total")])
    estimates = table.select(["level", "geocode"]).to_pandas()
    estimates["estimate"] = pc.list_element(table["estimates"], 0).to_numpy()
    estimates["variance"] = pc.list_element(table["variances"], 0).to_numpy()
    blocks = true_totals(input_dir)
    invariant = config.geography.index(config.total_invariant_level)
    found = []
    for level in config.geography.levels[invariant + 1 :]:
        rows = estimates[estimates["level"] == level.name].set_index("geocode")
        truth = blocks.groupby(blocks["geoid"].str[: level.length])["n"].sum()
        true = truth.reindex(rows.index, fill_value=0).to_numpy()
        error, variance = rows["estimate"].to_numpy() - true, rows["variance"].to_numpy()
        found.append(
            {
                "level": level.name,
                "geounits": len(rows),
                "expected_mae": float(np.mean(np.sqrt(2 * variance / np.pi))),
                "mae": float(np.mean(np.abs(error))),
                "coverage90": float(np.mean(np.abs(error) <= Z90 * np.sqrt(variance))),
            }
        )
    return pd.DataFrame(found)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--input", required=True)
    parser.add_argument("--config", default="configs/pl94_2020_production.toml")
    args = parser.parse_args(argv)
    print(bound(args.run, args.input, args.config).to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main()
