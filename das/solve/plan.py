"""What the solver needs to know about one level: its queries, their weights, the passes
and the constraints the configuration chooses, all of it small and picklable so that a
Spark task (or a notebook) can solve a family with it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from das.solve.target import level_target
from das.spec.config import Config
from das.spec.schema import Query, Schema


@dataclass(frozen=True)
class LevelPlan:
    """What the solver needs to know about one level, all of it small and picklable."""

    level: str
    queries: tuple[Query, ...]
    weights: dict[str, float]
    passes: tuple[tuple[str, ...], ...]
    totals_invariant: bool
    schema: Schema
    failsafe: bool
    combine_totals: bool
    #: "blue": the passes after the total pass fit the children's BLUE; "measurements": every
    #: pass fits their noisy answers (the leaf level always: das.solve.target).
    target: str
    solver: str  # a name in das.solve.solvers.SOLVERS
    mip_gap: float
    mip_time_limit: float
    #: The schema cells the queries are stated over, ascending (``das.solve.support``: a
    #: parent's support, each query's ``cell_map`` then indexing only the rows those cells
    #: reach); None: every cell of the schema.
    cells: np.ndarray | None = field(default=None, compare=False, repr=False)
    #: The query whose answers another product's published run fixes for every child
    #: (``postprocess.agree_on``; ``das.job.agreement``); None: no agreement.
    agree_on: Query | None = field(default=None, compare=False, repr=False)

    @property
    def n_cells(self) -> int:
        return self.schema.size if self.cells is None else int(self.cells.size)

    def structural_zero_mask(self) -> np.ndarray:
        """The structural zeros over the plan's cells."""
        mask = self.schema.structural_zero_mask
        return mask if self.cells is None else mask[self.cells]


def level_plan(config: Config, level: str) -> LevelPlan:
    queries = config.queries[level]
    measured = {q.name for q in queries}
    inv = config.total_invariant_level
    geo = config.geography
    return LevelPlan(
        level=level,
        queries=queries,
        # a query measured once at the level's only child (das.spec.bypass): that
        # measurement, with the rho of both levels, is the level's own answer too
        weights={q.name: float(1 / config.measured.fitted_sigma2(level, q.name)) for q in queries},
        passes=tuple(
            p for p in (tuple(q for q in ps if q in measured) for ps in config.passes) if p
        ),
        totals_invariant=inv is not None and geo.index(level) <= geo.index(inv),
        schema=config.schema,
        failsafe=config.file.postprocess.failsafe,
        combine_totals=config.file.postprocess.combine_totals,
        target=level_target(config, level),
        solver=config.file.postprocess.solver,
        mip_gap=config.file.postprocess.mip_gap,
        mip_time_limit=config.file.postprocess.mip_time_limit,
        agree_on=None
        if (name := config.file.postprocess.agree_on) is None
        else config.schema.query(name),
    )
