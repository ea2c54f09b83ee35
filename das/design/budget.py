"""``das design budget``: the shares of a config's rho that minimise a workload's error.

The config fixes what is measured (its levels and, per level, its queries) and the total
rho; the design moves rho between those (level, query) pairs. Each pair's share is
chosen to minimise the workload's expected squared error of the BLUE on a representative
hierarchy (``das.design.hierarchy``), exactly as the estimator computes it
(``das.design.variance``), by a convex solve (``das.design.optimise``): first on a thinned
copy of the hierarchy (cheap), then its shares, rounded to exact fractions
(``das.design.shares``), are evaluated exactly on the whole. They are the design unless they
break ``max_ratio`` there: only then is the solve refined on the whole, aiming lower each
round by what the rounding cost. A refinement gains little: the workload is flat along the
trades the caps leave open (on RI, the whole tree's own solve lowers the workload's error
by 0.13%: ``make bench-design-sensitivity``), and each of its gradients costs as many
passes of the whole tree as the workload has entries. Every figure printed is evaluated
exactly with the rounded shares, beside the config's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from das.design.hierarchy import Hierarchy, thinned
from das.design.optimise import Problem, Solution, entry_errors, exact_entries, solve
from das.design.shares import Shares, exact_shares
from das.design.variance import Tree, build_tree, covariance_sums, level_information, trace
from das.design.workload import Workload
from das.design.write import designed_config
from das.errors import UserError
from das.estimate.basis import schema_basis
from das.spec.config import Config

#: Geounits kept at the first wide level for the first solve (``hierarchy.thinned``).
THIN = 48
#: Iterations of a refinement on the whole hierarchy, from the thinned tree's optimum,
#: and of a solve from the config's shares.
REFINE, SOLVE = 6, 300
#: Refinements at most, when the rounded shares break ``max_ratio`` on the whole hierarchy:
#: the first aims at it, each later one lower by what the rounding cost.
ROUNDS = 3


@dataclass(frozen=True)
class Options:
    max_ratio: float | None = None
    denominator: int = 4096

    def __post_init__(self) -> None:
        if self.max_ratio is not None and not self.max_ratio >= 1:
            raise UserError(f"--max-ratio must be at least 1, got {self.max_ratio}")
        if self.denominator < 2:
            raise UserError(f"--denominator must be at least 2, got {self.denominator}")


@dataclass(frozen=True)
class Design:
    config: Config
    workload: Workload
    hierarchy: Hierarchy
    original: Shares
    chosen: Shares
    before: np.ndarray  # each entry's error under the config's shares
    after: np.ndarray  # and under the chosen ones (rounded)
    reference: list[tuple[str, float, float]]  # (what, before, after): not in the workload
    solutions: tuple[Solution, ...]  # the first on a thinned copy if ``thinned``
    options: Options
    thinned: bool = False

    def ratios(self) -> np.ndarray:
        """Each entry's error under the chosen shares over the config's; NaN for an entry
        known exactly (``optimise.exact_entries``)."""
        exact = exact_entries(self.before)
        return np.where(exact, np.nan, self.after / np.where(exact, 1.0, self.before))

    def worst(self) -> float:
        """The largest ratio of an entry not known exactly (0 if none)."""
        return worst_ratio(self.after, self.before)

    def workload_ratio(self) -> float:
        w = np.array([e.weight for e in self.workload.entries])
        return float(w @ self.after / (w @ self.before))


def worst_ratio(after: np.ndarray, before: np.ndarray) -> float:
    """The largest after / before of the entries not known exactly (0 if none)."""
    held = ~exact_entries(before)
    return float(np.max(after[held] / before[held], initial=0.0))


def config_shares(config: Config) -> Shares:
    b = config.budget
    return Shares(dict(b.level_shares), {lv: dict(qs) for lv, qs in b.query_shares.items()})


def pairs_of(config: Config) -> tuple[tuple[str, str], ...]:
    shares = config.budget.query_shares
    return tuple((lv, q) for lv in shares for q in shares[lv])


def _tree(config: Config, workload: Workload, hierarchy: Hierarchy) -> Tree:
    measured = [q for qs in config.queries.values() for q in qs]
    queries = [*measured, *(config.schema.query(q) for q in workload.queries())]
    basis = schema_basis(config.schema, queries)
    names = list(dict.fromkeys([*(q.name for q in queries), "total", "detailed"]))
    return build_tree(config.schema, basis, hierarchy, config.total_invariant_level, names)


def design_problem(config: Config, workload: Workload, hierarchy: Hierarchy) -> Problem:
    """The design's problem on ``hierarchy``: the config's (level, query) pairs as the
    variables, the workload's entries as the objective."""
    rho = float(config.budget.rho)
    return Problem(_tree(config, workload, hierarchy), pairs_of(config), rho, workload.entries)


def errors_of(problem: Problem, shares: Shares) -> np.ndarray:
    """Each workload entry's expected error under ``shares``, exactly."""
    return entry_errors(problem, _sums(problem, shares))


def design_budget(
    config: Config, workload: Workload, hierarchy: Hierarchy, options: Options
) -> Design:
    pairs = pairs_of(config)
    original = config_shares(config)
    start = original.vector(pairs)
    weights = np.array([e.weight for e in workload.entries])
    whole = design_problem(config, workload, hierarchy)
    before_sums = _sums(whole, original)
    before = entry_errors(whole, before_sums)
    solutions = []

    def rounded(x: np.ndarray) -> tuple[Shares, list, np.ndarray, float]:
        chosen = exact_shares(pairs, x, options.denominator)
        sums = _sums(whole, chosen)
        after = entry_errors(whole, sums)
        return chosen, sums, after, worst_ratio(after, before)

    small = thinned(hierarchy, THIN)
    if small is not hierarchy:
        cheap = design_problem(config, workload, small)
        solutions.append(solve(cheap, start, weights, options.max_ratio, start, SOLVE))
        chosen, after_sums, after, worst = rounded(solutions[-1].x)
    cap = options.max_ratio
    if not solutions or (cap is not None and worst > cap):  # refine on the whole
        x, iterations = (solutions[-1].x, REFINE) if solutions else (start, SOLVE)
        limit = cap
        for _ in range(ROUNDS):
            solutions.append(solve(whole, x, weights, limit, start, iterations))
            x, iterations = solutions[-1].x, REFINE
            chosen, after_sums, after, worst = rounded(x)
            if cap is None or limit is None or worst <= cap:
                break
            limit *= cap / worst  # the rounding cost that much: aim lower
    return Design(
        config,
        workload,
        hierarchy,
        original,
        chosen,
        before,
        after,
        _reference(whole, before_sums, after_sums),
        tuple(solutions),
        options,
        small is not hierarchy,
    )


def _sums(problem: Problem, shares: Shares) -> list:
    precisions = dict(zip(problem.pairs, problem.rho * shares.vector(problem.pairs), strict=True))
    return covariance_sums(problem.tree, level_information(problem.tree, precisions))


def _reference(problem: Problem, before: list, after: list) -> list[tuple[str, float, float]]:
    """The total and the detailed histogram at every level below the root: what the
    workload leaves out, per geounit, so that what it gives up shows."""
    tree, counts = problem.tree, problem.tree.counts()
    found = []
    for i, level in enumerate(tree.levels[1:], start=1):
        for query in ("total", "detailed"):
            g = tree.information(query)
            found.append(
                (
                    f"{level} {query}",
                    trace(tree.basis, before[i], g) / counts[i],
                    trace(tree.basis, after[i], g) / counts[i],
                )
            )
    return found


def check_out(config_path: str, out: str) -> None:
    """Before any work: ``--out`` must name a new file or one to replace, not the config."""
    if Path(out).resolve() == Path(config_path).resolve():
        raise UserError(f"--out {out} is the config itself: name a new file")
    if Path(out).is_dir():
        raise UserError(f"--out {out} is a directory: name a file, e.g. {out}/designed.toml")
    if not Path(out).resolve().parent.is_dir():
        raise UserError(f"--out {out}: its directory does not exist")


def write_design(design: Design, config_path: str, out: str) -> None:
    check_out(config_path, out)
    note = [
        f"Shares chosen by `das design budget` for the workload {design.workload.name!r}",
        f"on {design.hierarchy.describe()};",
        f"expected workload error {design.workload_ratio():.3f}x that of {config_path}'s shares.",
    ]
    text = designed_config(Path(config_path).read_text(encoding="utf-8"), config_path, design.chosen, note)
    Path(out).write_text(text, encoding="utf-8")
