"""The design's variances are the estimator's: on the toy tree, the dense GLS's."""

from __future__ import annotations

import numpy as np
import pytest

from das.design.hierarchy import Hierarchy
from das.design.optimise import Problem, evaluate
from das.design.variance import build_tree, covariance_sums, level_information, trace
from das.design.workload import Entry
from tests.unit.estimate.toy import ALL, LEVELS, PARENTS, dense_answers, dense_gls, toy


def _tree(t, invariant: str | None):
    hierarchy = Hierarchy("toy", tuple(LEVELS), tuple(PARENTS), 1, t.units)
    return build_tree(t.schema, t.basis, hierarchy, invariant, ALL)


def _precisions(t) -> dict[tuple[str, str], float]:
    return {(lv, q): 1 / v for lv, qs in t.variances.items() for q, v in qs.items()}


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize("invariant", [None, 0, 1, 2])
def test_traces_equal_the_dense_gls(zeros, invariant):
    t = toy(seed=3, zeros=zeros)
    answers = {lv: {q.name: np.zeros((len(m), q.size)) for q in t.queries[lv]}
               for lv, m in zip(LEVELS, t.membership, strict=True)}  # fmt: skip
    _, cov = dense_gls(t, answers, invariant)
    tree = _tree(t, None if invariant is None else LEVELS[invariant])
    sums = covariance_sums(tree, level_information(tree, _precisions(t)))
    for i in range(len(LEVELS)):
        for name in ALL:
            query = t.schema.query(name)
            _, var = dense_answers(t, np.zeros(cov.shape[0]), cov, i, query)
            got = trace(t.basis, sums[i], tree.information(name))
            assert got == pytest.approx(var.sum(), rel=1e-9, abs=1e-12)


def test_gradient_equals_finite_differences():
    """The derivative from one perturbed pass (module optimise) is the error's slope."""
    t = toy(seed=5, zeros=True)
    tree = _tree(t, "root")
    pairs = tuple(_precisions(t))
    entries = (
        Entry("middle total", "total", 1.0, {"middle": 1.0}, "why"),
        Entry("leaf g*b", "g*b", 0.5, {"leaf": 1.0}, "why"),
        Entry("area a", "a", 2.0, {"middle": 1.0, "leaf": 2.0}, "why", area="area"),
    )
    problem = Problem(tree, pairs, 3.0, entries)
    x = np.array(list(_precisions(t).values())) / 3.0
    x = x / x.sum()
    point = evaluate(problem, x, np.eye(3))
    assert point.jacobian is not None
    for j in range(len(pairs)):
        step = np.zeros_like(x)
        step[j] = 1e-5 * x[j]
        slope = (evaluate(problem, x + step).errors - evaluate(problem, x - step).errors) / (
            2 * step[j]
        )
        # rel: Richardson's truncation at optimise.STEP (2e-4 of a slope here)
        assert point.jacobian[:, j] == pytest.approx(slope, rel=5e-4, abs=1e-8)
