"""How well any linear unbiased estimate can know each geounit's total, from a run's NMF.

    python -m bench.total_bound RUN --input DIR [--config FILE]

The tree-wide best linear unbiased estimate of the total with the known zeros left out
(structural zeros, facility types without a unit: ``das.postprocess.below``) and the
state totals exact, in numpy: bottom-up (each geounit's own combination of its queries'
sums, ``das.solve.totals.combined_information``, with its children's, ``das.solve.totals.subtree_combination``), then
top-down. Its variance F per geounit gives the expected MAE of that estimate,
mean(sqrt(2 F / pi)) (a normal error), which no linear unbiased use of these measurements
beats; the protected output can, a little, with what is not linear (the parent's zeros,
nonnegativity). Prints, per level, the expected MAE, the estimate's MAE against the input
and the 90% interval's coverage.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from das.solve.family import allowed_cells, facility_bounds
from das.solve.plan import LevelPlan, level_plan
from das.solve.totals import combined_information, subtree_combination
from das.spec.config import load_config

Z90 = 1.6448536269514722


def nmf_answers(plan: LevelPlan, nmf: pd.DataFrame) -> tuple[list[str], dict[str, np.ndarray]]:
    """The level's geocodes (ascending) and each query's noisy answers (geounits x cells)
    from the NMF's rows (a pandas frame of ``nmf/``)."""
    rows = nmf[nmf["level"] == plan.level]
    codes = sorted(rows["geocode"].unique())
    answers = {
        q.name: np.stack(
            rows[rows["query"] == q.name].set_index("geocode").loc[codes, "values"].to_numpy()
        ).astype(np.float64)
        for q in plan.queries
    }
    return codes, answers


def level_inputs(config, nmf: pd.DataFrame, units: pd.DataFrame, truth: pd.DataFrame, level):
    """One measured level: geocodes, own estimate and information, true totals."""
    plan = level_plan(config, level.name)
    codes, answers = nmf_answers(plan, nmf)
    unit_counts = (
        units.assign(code=units["geoid"].str[: level.length])
        .groupby(["code", "gqtype"])
        .size()
        .unstack(fill_value=0)
        .reindex(index=codes, columns=range(8), fill_value=0)
        .to_numpy()
    )
    groups, _, upper = facility_bounds(plan.schema, unit_counts)
    own, information = combined_information(plan, answers, None, allowed_cells(groups, upper))
    true = truth.assign(code=truth["geoid"].str[: level.length]).groupby("code").size()
    return codes, own, information, true.reindex(codes, fill_value=0).to_numpy()


def bound(run: str, input_dir: str, config_path: str) -> pd.DataFrame:
    config = load_config(config_path, overrides=["run.production=false"], seed=1)
    nmf = pq.read_table(f"{run}/nmf").to_pandas()
    units = pq.read_table(
        f"{input_dir}/units.parquet", columns=["unit_id", "geoid", "gqtype", "occupied"]
    )
    units = units.to_pandas()
    units = units[(units["gqtype"] == 0) | units["occupied"]]
    persons = pq.read_table(f"{input_dir}/persons.parquet", columns=["unit_id"]).to_pandas()
    truth = persons.merge(units[["unit_id", "geoid"]], on="unit_id")
    if config.total_invariant_level is None:
        raise SystemExit(f"{config_path}: no invariant total: nothing to root the tree at")
    invariant = config.geography.index(config.total_invariant_level)
    levels = config.geography.levels[invariant:]
    ups, parents, found = [], [], []
    below = None
    for level in reversed(levels):
        codes, own, information, true = level_inputs(config, nmf, units, truth, level)
        dead = information == 0
        if level.name == config.total_invariant_level:
            z, Z = true.astype(np.float64), np.zeros(len(codes))  # exact
        else:
            pairs = None if below is None else np.column_stack(below)
            z, Z = subtree_combination(own, information, dead, pairs)
        ups.append((codes, z, Z, true))
        if level is not levels[0]:
            parent = pd.Series([c[: levels[levels.index(level) - 1].length] for c in codes])
            parents.append(parent)
            sums = pd.DataFrame({"p": parent, "z": z, "Z": Z}).groupby("p").sum()
            below = (sums["z"].to_numpy(), sums["Z"].to_numpy())
    ups, parents = ups[::-1], parents[::-1]
    f, F = ups[0][1], ups[0][2]
    for index in range(1, len(ups)):
        codes, z, Z, true = ups[index]
        above_codes = ups[index - 1][0]
        where = pd.Index(above_codes).get_indexer(parents[index - 1])
        sums = pd.DataFrame({"p": where, "z": z, "Z": Z}).groupby("p").sum()
        s, S = sums["z"].to_numpy()[where], sums["Z"].to_numpy()[where]
        gain = np.divide(Z, S, out=np.zeros_like(Z), where=S > 0)
        f, F = z + gain * (f[where] - s), Z - gain * Z + gain**2 * F[where]
        found.append(
            {
                "level": levels[index].name,
                "geounits": len(codes),
                "expected_mae": float(np.mean(np.sqrt(2 * np.maximum(F, 0) / np.pi))),
                "mae": float(np.mean(np.abs(f - true))),
                "coverage90": float(np.mean(np.abs(f - true) <= Z90 * np.sqrt(np.maximum(F, 0)))),
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
