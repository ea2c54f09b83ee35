"""How long the exact variances of many areas take (``das.estimate.unions``), on a
synthetic tree of the production persons configuration's shape.

    python -m bench.area_pullup [--blocks N] [--areas N] [--seed N]

The tree (one county under the U.S. and a state; tracts of about 100 blocks, block
groups of about 30) carries the configuration's information matrices and random
statistics: the BLUE's values are meaningless, the work is the real work. Areas are runs
of consecutive blocks of 1-400 blocks at random places (they cut across block groups
and tracts). Every line of P1-P5 is pulled up for every area (``--all``: and every
measured query's cells, as ``das estimate --areas``). Prints the seconds of the
two passes and of the areas' answers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from das.estimate.basis import query_kinds, schema_basis
from das.estimate.tree import LevelData
from das.estimate.unions import Areas, area_answers, functionals, passes
from das.job.area_estimates import items
from das.output.tables import tables_for
from das.spec.config import load_config

CONFIG = "configs/pl94_2020_production.toml"


def _parents(children: int, parents: int, rng: np.random.Generator) -> np.ndarray:
    cuts = np.sort(rng.choice(np.arange(1, children), parents - 1, replace=False))
    return np.repeat(np.arange(parents), np.diff(np.concatenate([[0], cuts, [children]])))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=5000)
    parser.add_argument("--areas", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--all",
        action="store_true",
        help="every measured query's cells too, as das estimate --areas",
    )
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    config = load_config(CONFIG, ["run.production=false"])
    schema = config.schema
    basis = schema_basis(schema, [q for qs in config.queries.values() for q in qs])
    sizes = [1, 1, 1, max(2, args.blocks // 100), max(3, args.blocks // 30), args.blocks]
    names = list(config.queries)
    levels = []
    for i, (name, n) in enumerate(zip(names, sizes, strict=True)):
        info = [np.zeros((c.d, c.d)) for c in basis.components]
        for q in config.queries[name]:
            v = float(config.budget.sigma2(name, q.name))
            blocks = basis.information(query_kinds(q, schema))
            info = [m + block / v for m, block in zip(info, blocks, strict=True)]
        b = [rng.normal(size=(n, c.r, c.d)) for c in basis.components]
        parent = None if i == 0 else _parents(n, sizes[i - 1], rng)
        levels.append(LevelData(name, parent, info, b))
    start = time.perf_counter()
    tree, estimates = passes(basis, levels)
    middle = time.perf_counter()
    length = rng.integers(1, 400, args.areas)
    first = rng.integers(0, args.blocks - length)
    leaf = np.concatenate([np.arange(f, f + n) for f, n in zip(first, length, strict=True)])
    area = np.repeat(np.arange(args.areas), length)
    cells = np.vstack([t.matrix(schema).toarray().T for t in tables_for(schema)])
    if args.all:
        cells = items(config)[2]
    rows = functionals(basis, cells)
    answers = area_answers(tree, estimates, Areas(leaf, area, args.areas), rows)
    end = time.perf_counter()
    kept = sum(len(k) * c.d for k, c in zip(rows.kept, basis.components, strict=True))
    print(
        f"{args.blocks} blocks, {args.areas} areas ({len(leaf)} block-area pairs), "
        f"{cells.shape[0]} lines ({kept} of {basis.cells} coordinates touched): "
        f"passes {middle - start:.1f} s, areas {end - middle:.1f} s; "
        f"{int(np.sum(answers.variances > 0))} positive variances"
    )


if __name__ == "__main__":
    main()
