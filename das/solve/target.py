"""What each family's L2 fit targets: the noisy measurements, or the tree-wide BLUE.

With ``postprocess.target = "blue"`` the passes after the ``total``-only pass fit the
children's best linear unbiased estimates (``estimates/``, written by ``das.estimate`` from
the public NMF and invariants only, so this is post-processing) instead of their noisy
answers, each (child, query row) weighted by the inverse of its estimate's variance. What
the BLUE adds to a child's own answers is what its subtree measured below it (the parent's
share reaches the fit anyway, through the parent's solution it must add up to). Two
places keep the measurements, because there the BLUE loses more than it adds
(docs/accuracy.md):

- the leaf level (``level_target``): a block has no subtree, and its BLUE, which imposes
  the structural zeros and the facility types the block has no unit of, still spreads
  people over the cells its parent's protected solution has at zero (on RI, seed 1, the
  BLUE there left most block queries' MAE 0.1-0.4% worse);
- the ``total``-only pass: ``postprocess.combine_totals`` and ``subtree_totals`` give each
  child's total from its own answers and its subtree's, leaving those zeros out too
  (``das.postprocess.below``), which the BLUE's total cannot.

The structured solver needs one Hessian per family up to a scale per child, so the weights
are factored as child_weights[c] x row_weights[query][row] (``blue_weights``): exact where
siblings' variances are proportional; elsewhere (siblings with different known zeros, or
blocks of different sizes below them) the least-squares fit of the log precisions. That
is an approximation, and a diagonal weight is one anyway (the BLUE's errors are
correlated): the weights decide only how the fit shares out what the children's BLUE and
their parent's solution disagree on, and where nonnegativity binds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from das.spec.config import Config

#: The pseudo-query names under which a query's BLUE and its variances travel beside its
#: noisy answers.
ESTIMATE_SUFFIX, VARIANCE_SUFFIX = "/blue", "/variance"


def estimate_name(query: str) -> str:
    return f"{query}{ESTIMATE_SUFFIX}"


def variance_name(query: str) -> str:
    return f"{query}{VARIANCE_SUFFIX}"


def target_names(queries: Sequence[str], blue: bool) -> list[str]:
    """The names pivoted per child: the queries (their noisy answers), then (BLUE) their
    estimates' names and their variances'."""
    names = list(queries)
    if not blue:
        return names
    return names + [estimate_name(q) for q in queries] + [variance_name(q) for q in queries]


def level_target(config: Config, level: str) -> str:
    """The target of ``level``'s families: the configured one, but the measurements at the
    leaf level (see the module's docstring)."""
    if level == config.geography.block.name:
        return "measurements"
    return config.file.postprocess.target


def blue_weights(
    variances: dict[str, np.ndarray], queries: Sequence[str]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(child weights, row weights per query) whose products approximate 1 / variance.

    log(1/v[c, q, r]) ~ a_c + b_qr: b the mean over the children, a the mean over the
    rows of what is left (the least-squares fit of the two-way table), each scaled so its
    largest weight is 1 (a common factor does not move the minimiser). A zero variance (a
    total held exact, a known zero: already a constraint) is left out of the fit; a row
    with no other gets the largest row weight, a child with no other the mean.
    """
    log_precision, known = _log_precisions(variances, queries)
    counts = known.sum(axis=0)
    sums = np.where(known, log_precision, 0.0).sum(axis=0)
    rows = sums / np.maximum(counts, 1)
    if counts.any():
        rows[counts == 0] = rows[counts > 0].max()
    left = np.where(known, log_precision - rows[None, :], 0.0)
    per_child = known.sum(axis=1)
    child = np.where(per_child > 0, left.sum(axis=1) / np.maximum(per_child, 1), 0.0)
    child_weights = np.exp(child - child.max())
    row_weights = np.exp(rows - rows.max())
    bounds = np.cumsum([0] + [np.shape(variances[q])[1] for q in queries])
    return child_weights, {q: row_weights[bounds[i] : bounds[i + 1]] for i, q in enumerate(queries)}


def _log_precisions(
    variances: dict[str, np.ndarray], queries: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """log(1 / variance) of every (child, query row), and where the variance is positive
    (0 elsewhere)."""
    stacked = np.hstack([np.asarray(variances[q], dtype=np.float64) for q in queries])
    known = stacked > 0
    return -np.log(np.where(known, stacked, 1.0)), known
