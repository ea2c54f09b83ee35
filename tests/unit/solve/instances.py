"""Random post-processing instances with a known truth, for tests and the benchmark.

A truth is drawn child by child the way a block group looks: a few race/ethnicity cells
hold most people, most cells are empty, a few children hold group-quarters facilities whose
residents fill their own hhgq level. The parent is the children's sum, the noisy answers
are the true answers plus Gaussian noise of variance 1/weight, and the facility bounds are
what the units table would give (at least one person per facility, none where there is no
housing unit or facility of that type), so every instance is feasible with the truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from das.solve.parent import UNBOUNDED, FixedQuery, Measurement, ParentProblem, solve_parent
from das.spec.schema import Schema, load_schema, schema_from_dict

#: The ten non-total queries of the 2020 persons strategy (the second pass).
STRATEGY_QUERIES = (
    "hhgq", "hhinstlevels", "votingage", "hispanic", "cenrace", "hispanic*cenrace",
    "votingage*cenrace", "votingage*hispanic", "votingage*hispanic*cenrace", "detailed",
)

#: Plausible shares of a level's rho per query (2020-like: most on the detailed cells).
STRATEGY_SHARES = {
    "hhgq": 0.05, "hhinstlevels": 0.05, "votingage": 0.05, "hispanic": 0.05, "cenrace": 0.05,
    "hispanic*cenrace": 0.08, "votingage*cenrace": 0.08, "votingage*hispanic": 0.05,
    "votingage*hispanic*cenrace": 0.14, "detailed": 0.40,
}

TOY_SCHEMA = {
    "name": "toy",
    "record": "persons",
    "attributes": [
        {"name": "kind", "source": "kind", "recode": "identity", "levels": ["a", "b", "c"]},
        {"name": "adult", "source": "adult", "recode": "bool", "levels": ["no", "yes"]},
    ],
    "structural_zeros": [{"kind": [2], "adult": [0]}],
    "facilities": {"attribute": "kind"},
}


@dataclass(frozen=True)
class Instance:
    """A problem and the truth it was drawn from (children x cells)."""

    problem: ParentProblem
    truth: np.ndarray


def persons_schema() -> Schema:
    return load_schema("pl94_persons")


def toy_schema() -> Schema:
    return schema_from_dict(TOY_SCHEMA)


def _cell_probabilities(schema: Schema, rng: np.random.Generator) -> np.ndarray:
    """Skewed household cell probabilities: a few race cells dominate, as in real blocks."""
    shape = schema.shape
    probs = np.ones(shape)
    for axis, size in enumerate(shape[1:], start=1):
        if size > 2:
            weights = (1.0 / np.arange(1, size + 1) ** 1.6)[rng.permutation(size)]
        else:
            weights = rng.dirichlet(np.full(size, 4.0))
        index = [None] * len(shape)
        index[axis] = slice(None)
        probs = probs * (weights / weights.sum())[tuple(index)]
    probs[1:] = 0.0  # household persons only in the first facility level
    flat = probs.ravel()
    flat[schema.structural_zero_mask] = 0.0
    return flat / flat.sum()


def _facility_people(schema: Schema, rng: np.random.Generator, level: int, n: int,
                     household: np.ndarray) -> np.ndarray:
    """Counts of ``n`` residents of a facility at ``level``: household mix moved to that level."""
    shape = schema.shape
    probs = household.reshape(shape)[0].copy()
    cells = np.zeros(shape)
    cells[level] = probs
    flat = cells.ravel()
    flat[schema.structural_zero_mask] = 0.0
    flat = flat / flat.sum()
    return rng.multinomial(n, flat)


def draw_truth(schema: Schema, rng: np.random.Generator, n_children: int, mean_size: float,
               gq_rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Children's true histograms plus facility lower/upper bounds consistent with them."""
    groups = schema.attribute(schema.facility_attribute).size
    household = _cell_probabilities(schema, rng)
    truth = np.zeros((n_children, schema.size), dtype=np.int64)
    lower = np.zeros((n_children, groups), dtype=np.int64)
    upper = np.zeros((n_children, groups), dtype=np.int64)
    for c in range(n_children):
        size = int(rng.gamma(0.9, mean_size / 0.9))
        truth[c] = rng.multinomial(size, household)
        occupied = round(size / 2.6)
        lower[c, 0] = occupied
        upper[c, 0] = UNBOUNDED if size > 0 or rng.random() < 0.7 else 0
        for g in range(1, groups):
            facilities = int(rng.random() < gq_rate) * (1 + rng.poisson(0.3))
            if facilities:
                residents = facilities + rng.poisson(12 * facilities)
                truth[c] += _facility_people(schema, rng, g, residents, household)
                lower[c, g], upper[c, g] = facilities, UNBOUNDED
    return truth, lower, upper


def measure(schema: Schema, truth: np.ndarray, rng: np.random.Generator,
            weights: Mapping[str, float], noise: bool = True) -> tuple[Measurement, ...]:
    """Noisy answers (Gaussian, variance 1/weight) of each query for every child."""
    out = []
    for name, weight in weights.items():
        matrix = schema.query(name).matrix
        answers = (matrix @ truth.T).T.astype(float)
        if noise:
            answers = answers + rng.normal(0.0, 1.0 / np.sqrt(weight), answers.shape)
        out.append(Measurement(name, matrix, float(weight), answers))
    return tuple(out)


def strategy_weights(rho: float, queries: Sequence[str] = STRATEGY_QUERIES) -> dict[str, float]:
    """Weights 1/sigma^2 = rho_q for the given queries, with 2020-like shares of ``rho``."""
    shares = np.array([STRATEGY_SHARES.get(q, 0.1) for q in queries])
    return {q: float(rho * s / shares.sum()) for q, s in zip(queries, shares, strict=True)}


def parent_instance(seed: int, *, schema: Schema | None = None, n_children: int = 5,
                    mean_size: float = 30.0, gq_rate: float = 0.05, rho: float = 0.1,
                    queries: Sequence[str] = STRATEGY_QUERIES, groups: bool = True,
                    fix_totals: bool = True, noise: bool = True) -> Instance:
    """A parent with ``n_children`` children drawn from the truth model above."""
    schema = schema or persons_schema()
    rng = np.random.default_rng(seed)
    truth, lower, upper = draw_truth(schema, rng, n_children, mean_size, gq_rate)
    problem = ParentProblem(
        parent=truth.sum(axis=0),
        n_children=n_children,
        measurements=measure(schema, truth, rng, strategy_weights(rho, queries), noise),
        structural_zero=schema.structural_zero_mask,
        facility_groups=_facility_level(schema) if groups else None,
        group_lower=lower if groups else None,
        group_upper=upper if groups else None,
        child_totals=truth.sum(axis=1) if fix_totals else None,
    )
    return Instance(problem, truth)


def root_instance(seed: int, *, schema: Schema | None = None, size: float = 3000.0,
                  rho: float = 1.0, queries: Sequence[str] = STRATEGY_QUERIES,
                  noise: bool = True) -> Instance:
    """The root solved alone (parent=None) with its total as an invariant."""
    schema = schema or persons_schema()
    rng = np.random.default_rng(seed)
    truth, lower, upper = draw_truth(schema, rng, 1, size, 0.9)
    problem = ParentProblem(
        parent=None,
        n_children=1,
        measurements=measure(schema, truth, rng, strategy_weights(rho, queries), noise),
        structural_zero=schema.structural_zero_mask,
        facility_groups=_facility_level(schema),
        group_lower=lower,
        group_upper=upper,
        child_totals=truth.sum(axis=1),
    )
    return Instance(problem, truth)


def fixed_totals(schema: Schema, truth: np.ndarray) -> FixedQuery:
    """The children's true totals as a generic fixed query (same meaning as child_totals)."""
    return FixedQuery("total", schema.query("total").matrix, truth.sum(axis=1)[:, None])


def _facility_level(schema: Schema) -> np.ndarray:
    """Facility group of each cell: its level of the schema's facility attribute."""
    codes = schema.cell_codes(np.arange(schema.size))
    return codes[:, schema.axis(schema.facility_attribute)]


# ---- the instances the per-parent tests share --------------------------------------------
#: Seeds of the small instances most per-parent tests run on.
SEEDS = (11, 12, 13)
TOY_QUERIES = ("kind", "adult", "detailed")


def small(seed: int, **kw) -> Instance:
    """3-8 children, 20-200 live cells of the persons schema."""
    rng = np.random.default_rng(seed)
    options = {"n_children": int(rng.integers(3, 9)), "mean_size": 25.0, "gq_rate": 0.3, **kw}
    return parent_instance(seed, **options)


def toy(seed: int, **kw) -> Instance:
    """The 3 x 2 toy schema (one structural zero), 6 children."""
    return parent_instance(
        seed,
        schema=toy_schema(),
        queries=TOY_QUERIES,
        n_children=6,
        mean_size=12.0,
        gq_rate=0.4,
        **kw,
    )


def total_only(instance: Instance, with_totals: bool = False) -> ParentProblem:
    """The instance's ``total``-only pass: the children's totals, noisy (sd 3), weight 0.1."""
    schema = persons_schema()
    rng = np.random.default_rng(0)
    truth = instance.truth
    answers = truth.sum(axis=1, keepdims=True) + rng.normal(0, 3.0, (truth.shape[0], 1))
    measurement = Measurement("total", schema.query("total").matrix, 0.1, answers)
    totals = instance.problem.child_totals if with_totals else None
    return replace(instance.problem, measurements=(measurement,), child_totals=totals)


def relative(a: float, b: float) -> float:
    """|a - b| relative to b (to 1e-3 near 0)."""
    return abs(a - b) / max(abs(b), 1e-3)


def second_pass(problem: ParentProblem) -> ParentProblem:
    """The problem's ``detailed`` pass with its other queries held at a rounded first pass:
    many equality rows per child, as the DHC-P ``detailed`` pass and an agreement hold."""
    first = solve_parent(
        replace(
            problem,
            measurements=tuple(m for m in problem.measurements if m.query_name != "detailed"),
        )
    ).counts
    fixed = tuple(
        FixedQuery(m.query_name, m.matrix, np.asarray(m.matrix @ first.T).T)
        for m in problem.measurements
        if m.query_name != "detailed"
    )
    return replace(
        problem,
        measurements=tuple(m for m in problem.measurements if m.query_name == "detailed"),
        fixed=fixed,
        child_totals=first.sum(axis=1),
    )
