"""The per-parent problem of one pass: what to fit and what must hold, validated and frozen.

``ParentProblem`` states one parent with all its children in one pass over the schema's
cells: the ``Measurement``s to fit, and the ``FixedQuery``s, totals and facility-group
bounds that must hold exactly. It validates every field on construction, so the solvers can
trust it, and is frozen with read-only arrays, so it can be handed around without copies.
``das.solve.parent`` solves it; ``das.solve.compact`` turns it into the solvers' form over blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from das.errors import InternalError

#: An upper group bound at or above this means "no bound" (the caller's sentinel).
UNBOUNDED = np.iinfo(np.int64).max // 4


def column_entries(matrix: sp.csc_matrix, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``columns``, index into ``matrix.indices`` and ``matrix.data``) of every
    stored entry of the given columns, column after column, vectorised."""
    starts = matrix.indptr[columns]
    counts = matrix.indptr[columns + 1] - starts
    position = np.repeat(np.arange(columns.size), counts)
    first = np.cumsum(counts) - counts
    return position, np.arange(int(counts.sum())) - np.repeat(first - starts, counts)


def group_sums(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """(rows, n_groups): each row of ``values`` summed over the columns of each group
    (``groups``, one per column). One bincount for all rows instead of one per row: each
    sum still takes its terms in column order, so the floats are the same. Integer values
    (counts being checked) are summed as integers, each group's columns side by side in
    one reduceat: exact, and several times faster than bincount's float weights."""
    values = np.asarray(values)
    rows = values.shape[0]
    if values.dtype.kind in "iu":  # integers: exact in any order, summed in integers
        sizes = np.bincount(groups, minlength=n_groups)
        starts = np.cumsum(sizes) - sizes
        sums = np.zeros((rows, n_groups), dtype=values.dtype)
        held = sizes > 0  # reduceat would give an empty group its next column
        ordered = values[:, np.argsort(groups, kind="stable")]
        sums[:, held] = np.add.reduceat(ordered, starts[held], axis=1)
        return sums
    keys = (np.arange(rows)[:, None] * n_groups + np.asarray(groups)[None, :]).ravel()
    sums = np.bincount(keys, weights=values.ravel(), minlength=rows * n_groups)
    return sums.reshape(rows, n_groups)


def _frozen_array(value: object, dtype: type) -> np.ndarray:
    """A read-only copy of ``value`` as ``dtype``, so a frozen problem stays frozen."""
    array: np.ndarray = np.array(value, dtype=dtype, copy=True)
    array.setflags(write=False)
    return array


def _integral_array(value: object, name: str) -> np.ndarray:
    """An int64 copy of ``value``, refusing non-integral numbers instead of truncating them."""
    raw = np.asarray(value)
    if raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.round(raw))):
        raise InternalError(f"{name} must hold integers, got non-integral values")
    if raw.dtype.kind not in "iuf" and raw.size:
        raise InternalError(f"{name} must be numeric, got dtype {raw.dtype}")
    return _frozen_array(raw, np.int64)


def _query_matrix(matrix: object, name: str) -> sp.csr_matrix:
    """Check a query matrix is 0/1 with one 1 per column (it partitions the cells)."""
    csr = sp.csr_matrix(matrix, dtype=np.float64)
    csr.sum_duplicates()
    if csr.nnz and not np.all(csr.data == 1.0):
        raise InternalError(f"{name}: matrix entries must be 0 or 1")
    per_column = np.bincount(csr.indices, minlength=csr.shape[1])  # entries are 1, no duplicates
    if not np.all(per_column == 1):
        bad = int(np.flatnonzero(per_column != 1)[0])
        raise InternalError(f"{name}: cell {bad} is in {int(per_column[bad])} query cells, not 1")
    return csr


def _positive_weights(value: object, name: str) -> np.ndarray:
    """A read-only float copy of ``value``, refusing weights that are not positive and finite."""
    weights = _frozen_array(value, np.float64)
    if not np.all(np.isfinite(weights) & (weights > 0)):
        raise InternalError(f"{name}: weights must be positive finite numbers")
    return weights


@dataclass(frozen=True)
class Measurement:
    """Noisy answers of one query for every child: ``answers[c] ~ matrix @ truth[c]``.

    ``weight`` is 1/sigma^2 of the noise (equal to rho_q for a marginal query), so the L2
    objective is the negative log-likelihood up to a constant. ``row_weights`` (one per
    query row, shared by the children; None: all 1) multiply it row by row, for answers
    whose precision differs between the query's cells (the BLUE of ``estimates/``).
    """

    query_name: str
    matrix: sp.csr_matrix = field(repr=False)
    weight: float
    answers: np.ndarray = field(repr=False)
    row_weights: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix", _query_matrix(self.matrix, self.query_name))
        if not (np.isfinite(self.weight) and self.weight > 0):
            raise InternalError(
                f"measurement {self.query_name!r}: weight must be a positive "
                f"finite number, got {self.weight!r}"
            )
        answers = _frozen_array(self.answers, np.float64)
        if answers.ndim != 2 or answers.shape[1] != self.matrix.shape[0]:
            raise InternalError(
                f"measurement {self.query_name!r}: answers must be (children x "
                f"{self.matrix.shape[0]}), got shape {answers.shape}"
            )
        if not np.all(np.isfinite(answers)):
            raise InternalError(f"measurement {self.query_name!r}: answers hold NaN or inf")
        object.__setattr__(self, "answers", answers)
        if self.row_weights is not None:
            rows = _positive_weights(self.row_weights, f"measurement {self.query_name!r}")
            if rows.shape != (self.matrix.shape[0],):
                raise InternalError(
                    f"measurement {self.query_name!r}: row_weights must have shape "
                    f"({self.matrix.shape[0]},), got {rows.shape}"
                )
            object.__setattr__(self, "row_weights", rows)

    @property
    def n_children(self) -> int:
        return int(self.answers.shape[0])

    def weights(self) -> np.ndarray:
        """The weight of each query row: ``weight`` times its row weight."""
        rows = np.ones(self.matrix.shape[0]) if self.row_weights is None else self.row_weights
        return self.weight * rows


@dataclass(frozen=True)
class FixedQuery:
    """Equality constraints ``matrix @ x[c] == values[c]`` carried over from earlier passes."""

    query_name: str
    matrix: sp.csr_matrix = field(repr=False)
    values: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix", _query_matrix(self.matrix, self.query_name))
        values = _integral_array(self.values, f"fixed {self.query_name!r} values")
        if values.ndim != 2 or values.shape[1] != self.matrix.shape[0]:
            raise InternalError(
                f"fixed {self.query_name!r}: values must be (children x "
                f"{self.matrix.shape[0]}), got shape {values.shape}"
            )
        if np.any(values < 0):
            raise InternalError(f"fixed {self.query_name!r}: values must be >= 0")
        object.__setattr__(self, "values", values)


@dataclass(frozen=True)
class ParentProblem:
    """One parent and all its children, one pass: what to fit and what must hold exactly.

    ``parent`` is the parent's final integer histogram over the schema's cells, or None for
    the root geounit solved alone (then ``n_children`` is 1 and no children-sum holds).
    ``facility_groups[k]`` is the facility group of cell k (for persons: its hhgq level);
    ``group_lower[c, g] <= sum of child c's counts in group g <= group_upper[c, g]``, where an
    upper bound >= ``UNBOUNDED`` means none. ``child_totals`` are totals fixed exactly;
    ``fixed`` holds any other equalities carried over from earlier passes.
    ``child_weights`` (None: all 1) multiply child c's whole objective: children whose
    answers are more precise pull harder. With the measurements' row weights the objective
    is sum_c child_weights[c] sum_m weight_m sum_r row_weights_m[r] (A_m x_c - y_mc)_r^2,
    a weight per (child, query row) that factors, so every child keeps one Hessian up to
    a scale (what the structured solver needs).
    """

    parent: np.ndarray | None
    n_children: int
    measurements: tuple[Measurement, ...]
    structural_zero: np.ndarray
    facility_groups: np.ndarray | None = None
    group_lower: np.ndarray | None = None
    group_upper: np.ndarray | None = None
    child_totals: np.ndarray | None = None
    fixed: tuple[FixedQuery, ...] = ()
    child_weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        zero = _frozen_array(self.structural_zero, bool)
        if zero.ndim != 1 or zero.size == 0:
            raise InternalError(
                f"structural_zero must be a non-empty vector, got shape {zero.shape}"
            )
        object.__setattr__(self, "structural_zero", zero)
        object.__setattr__(self, "measurements", tuple(self.measurements))
        object.__setattr__(self, "fixed", tuple(self.fixed))
        self._check_parent()
        self._check_measurements()
        self._check_groups()
        self._check_totals()
        if self.child_weights is not None:
            weights = _positive_weights(self.child_weights, "child_weights")
            if weights.shape != (self.n_children,):
                raise InternalError(
                    f"child_weights must have shape ({self.n_children},), got {weights.shape}"
                )
            object.__setattr__(self, "child_weights", weights)

    def _check_parent(self) -> None:
        if not isinstance(self.n_children, int | np.integer) or self.n_children < 1:
            raise InternalError(f"n_children must be a positive integer, got {self.n_children!r}")
        object.__setattr__(self, "n_children", int(self.n_children))
        if self.parent is None:
            if self.n_children != 1:
                raise InternalError(
                    f"the root (parent=None) is solved alone: n_children must be "
                    f"1, got {self.n_children}"
                )
            return
        parent = _integral_array(self.parent, "parent")
        if parent.shape != (self.n_cells,):
            raise InternalError(f"parent must have shape ({self.n_cells},), got {parent.shape}")
        if np.any(parent < 0):
            raise InternalError(f"parent has negative count {int(parent.min())}")
        if np.any(parent[self.structural_zero] != 0):
            cell = int(np.flatnonzero(self.structural_zero & (parent != 0))[0])
            raise InternalError(
                f"parent has count {int(parent[cell])} in structural-zero cell {cell}"
            )
        object.__setattr__(self, "parent", parent)

    def _check_measurements(self) -> None:
        if not self.measurements:
            raise InternalError("a pass needs at least one measurement")
        names = [m.query_name for m in self.measurements]
        if len(set(names)) != len(names):
            raise InternalError(f"measurement query names repeat: {names}")
        queries: tuple[Measurement | FixedQuery, ...] = (*self.measurements, *self.fixed)
        for m in queries:
            kind = "measurement" if isinstance(m, Measurement) else "fixed query"
            if m.matrix.shape[1] != self.n_cells:
                raise InternalError(
                    f"{kind} {m.query_name!r}: matrix has {m.matrix.shape[1]} "
                    f"columns, expected {self.n_cells} cells"
                )
            rows = (m.answers if isinstance(m, Measurement) else m.values).shape[0]
            if rows != self.n_children:
                raise InternalError(
                    f"{kind} {m.query_name!r}: {rows} rows of answers for "
                    f"{self.n_children} children"
                )

    def _check_groups(self) -> None:
        given = [v is not None for v in (self.facility_groups, self.group_lower, self.group_upper)]
        if not any(given):
            return
        if not all(given):
            raise InternalError(
                "facility_groups, group_lower and group_upper go together: give all three or none"
            )
        groups = _integral_array(self.facility_groups, "facility_groups")
        lower = _integral_array(self.group_lower, "group_lower")
        upper = _integral_array(self.group_upper, "group_upper")
        if groups.shape != (self.n_cells,):
            raise InternalError(
                f"facility_groups must have shape ({self.n_cells},), got {groups.shape}"
            )
        if lower.ndim != 2 or lower.shape[0] != self.n_children or upper.shape != lower.shape:
            raise InternalError(
                f"group_lower and group_upper must be (n_children={self.n_children}"
                f" x groups), got {lower.shape} and {upper.shape}"
            )
        if groups.min() < 0 or groups.max() >= lower.shape[1]:
            raise InternalError(
                f"facility_groups must be in 0..{lower.shape[1] - 1}, got "
                f"{int(groups.min())}..{int(groups.max())}"
            )
        if lower.min(initial=0) < 0 or upper.min(initial=0) < 0:
            raise InternalError("group bounds must be >= 0")
        object.__setattr__(self, "facility_groups", groups)
        object.__setattr__(self, "group_lower", lower)
        object.__setattr__(self, "group_upper", upper)

    def _check_totals(self) -> None:
        if self.child_totals is None:
            return
        totals = _integral_array(self.child_totals, "child_totals")
        if totals.shape != (self.n_children,):
            raise InternalError(
                f"child_totals must have shape ({self.n_children},), got {totals.shape}"
            )
        if np.any(totals < 0):
            raise InternalError(f"child_totals has negative total {int(totals.min())}")
        object.__setattr__(self, "child_totals", totals)

    # ---- derived views ------------------------------------------------------------------
    @property
    def n_cells(self) -> int:
        return int(self.structural_zero.size)

    def child_scale(self) -> np.ndarray:
        """Each child's weight (all 1 without ``child_weights``)."""
        if self.child_weights is None:
            return np.ones(self.n_children)
        return np.asarray(self.child_weights)

    @property
    def n_groups(self) -> int:
        return 0 if self.group_lower is None else int(self.group_lower.shape[1])

    @property
    def live(self) -> np.ndarray:
        """Cells that get variables: positive in the parent (all, at the root), not zeros by
        design."""
        if self.parent is None:
            return ~self.structural_zero
        return (self.parent > 0) & ~self.structural_zero

    def effective_group_upper(self) -> np.ndarray | None:
        """Group upper bounds tightened by the fixed totals, as int64 (children x groups).

        With child c's total fixed at t_c and every group at least its lower bound, group g can
        hold at most t_c - sum_{h != g} lower[c, h]. This bound is implied by the others, so
        it changes no feasible point; it only replaces the "unbounded" sentinel by a number.
        """
        if self.group_upper is None:
            return None
        upper = np.minimum(self.group_upper, UNBOUNDED)
        if self.child_totals is not None and self.group_lower is not None:
            others = self.group_lower.sum(axis=1, keepdims=True) - self.group_lower
            upper = np.minimum(upper, self.child_totals[:, None] - others)
        return upper
