"""Histogram schemas as data: attributes, their recodes, and marginal queries.

A schema is read from a TOML file (the shipped ones live in ``das/schemas/``). It lists
attributes in order; the histogram is their Cartesian product in C order, so a record's
cell index is ``numpy.ravel_multi_index(codes, shape)``. Nothing in the engine knows the
names "hhgq" or "cenrace": a new schema needs a new TOML file, not new code.

A marginal query is named by its factors joined with ``*`` (``votingage*hispanic*cenrace``);
each factor is an attribute or a grouping of one attribute's levels (``hhinstlevels``).
``total`` has no factor and ``detailed`` has every attribute. Every query partitions the
cells, so it is held as each cell's row (``Query.cell_map``: one integer per cell, whatever
the query's size); its matrix (the Kronecker product of identities, grouping matrices and
rows of ones) is built from that index only on demand, one entry per cell, never dense.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from das.errors import UserError
from das.spec.cenrace import LEVEL_GENERATORS

#: Recode names the reader understands (see ``das.input.read``), with the keys each one takes.
RECODES: dict[str, tuple[str, ...]] = {
    "identity": (),  # integer column already coded 0..size-1
    "bool": (),  # boolean column: False -> 0, True -> 1
    "offset": ("offset",),  # integer column coded offset..offset+size-1
    "cut": ("cuts", "valid_range"),  # integer column binned at the cut points
    "race_flags": (),  # six boolean race columns -> CENRACE combination 0..62
}


@dataclass(frozen=True)
class Attribute:
    """One dimension of the histogram and how to derive it from input columns."""

    name: str
    levels: tuple[str, ...]
    source: tuple[str, ...]
    recode: str
    offset: int = 0
    cuts: tuple[int, ...] = ()
    valid_range: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.recode not in RECODES:
            raise UserError(
                f"attribute {self.name!r}: unknown recode {self.recode!r}; "
                f"allowed: {', '.join(sorted(RECODES))}"
            )
        if len(set(self.levels)) != len(self.levels) or not self.levels:
            raise UserError(
                f"attribute {self.name!r}: levels must be a non-empty list of distinct names"
            )
        if self.recode == "cut" and len(self.cuts) + 1 != self.size:
            raise UserError(
                f"attribute {self.name!r}: {len(self.cuts)} cut points make "
                f"{len(self.cuts) + 1} bins but there are {self.size} levels"
            )
        if self.recode == "race_flags" and (len(self.source) != 6 or self.size != 63):
            raise UserError(
                f"attribute {self.name!r}: race_flags needs 6 source columns and 63 levels"
            )
        if self.recode != "race_flags" and len(self.source) != 1:
            raise UserError(
                f"attribute {self.name!r}: recode {self.recode!r} takes one source column"
            )

    @property
    def size(self) -> int:
        return len(self.levels)


@dataclass(frozen=True)
class Grouping:
    """A coarsening of one attribute: each group is a set of its levels."""

    name: str
    attribute: str
    groups: tuple[tuple[int, ...], ...]
    labels: tuple[str, ...]

    def group_of(self, size: int) -> np.ndarray:
        """The group of each of the attribute's ``size`` levels."""
        found = np.empty(size, dtype=np.int64)
        for g, members in enumerate(self.groups):
            found[list(members)] = g
        return found


def query_rows(matrix: sp.csr_matrix) -> np.ndarray:
    """Row of every column of a CSR matrix with exactly one entry per column: a query
    matrix (every query partitions the cells), or a fixed query's (``das.solve.compact``).

    Read from the CSR structure directly: a conversion to CSC cost more than the rest of
    the lookup, and the solver runs it for every query of every parent.
    """
    rows = np.empty(matrix.shape[1], dtype=np.int64)
    rows[matrix.indices] = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    return rows


@dataclass(frozen=True)
class Query:
    """A marginal query: ``cell_map`` is the query cell (row) of each histogram cell, int64;
    ``size`` its rows; ``matrix @ histogram`` its answer, one entry per query cell."""

    name: str
    factors: tuple[str, ...]
    cell_map: np.ndarray = field(repr=False, compare=False)
    size: int

    @cached_property
    def matrix(self) -> sp.csr_matrix:
        """The sparse 0/1 matrix (query cells x cells) of ``cell_map``, built on first use."""
        cells = self.cell_map.size
        order = np.argsort(self.cell_map, kind="stable")
        indptr = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.cell_map, minlength=self.size), out=indptr[1:])
        return sp.csr_matrix(
            (np.ones(cells), order.astype(np.int32), indptr.astype(np.int32)),
            shape=(self.size, cells),
        )

    def answer(self, cells: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The query's exact answer (int64, zero cells included) on a sparse histogram."""
        return np.bincount(self.cell_map[cells], weights=counts, minlength=self.size).astype(
            np.int64
        )


@dataclass(frozen=True)
class OutputColumn:
    """One column of the protected microdata: an attribute's level mapped to a published code."""

    name: str
    attribute: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class Schema:
    """The histogram layout: attributes in order, named groupings, structural zeros."""

    name: str
    record: str
    attributes: tuple[Attribute, ...]
    groupings: Mapping[str, Grouping] = field(default_factory=dict)
    structural_zeros: tuple[Mapping[str, tuple[int, ...]], ...] = ()
    facility_attribute: str | None = None
    record_filter: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    output: tuple[OutputColumn, ...] = ()
    description: str = ""
    #: What one record is, for the certificate's privacy statement ("person", "housing unit").
    protected_unit: str = ""
    #: The unit type (the units table's ``gqtype``) each level of ``facility_attribute``
    #: lives in; empty: level i <-> type i.
    facility_types: tuple[int, ...] = ()
    #: Queries the confidential report takes at every level, measured there or not: what a
    #: product's users read (DHC-P: sex by the 23 age groups of table P12, and so on).
    report: tuple[str, ...] = ()
    #: Queries built so far, by canonical name: the levels of a run share them.
    _queries: dict[str, Query] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.record not in ("persons", "units"):
            raise UserError(
                f"schema {self.name!r}: record must be 'persons' or 'units', got {self.record!r}"
            )
        names = [a.name for a in self.attributes]
        if len(set(names)) != len(names) or not names:
            raise UserError(f"schema {self.name!r}: attribute names must be non-empty and distinct")
        for reserved in ("total", "detailed"):
            if reserved in names or reserved in self.groupings:
                raise UserError(f"schema {self.name!r}: {reserved!r} is a reserved query name")
        for grouping in self.groupings.values():
            self._check_grouping(grouping)
        for zero in self.structural_zeros:
            for attr, levels in zero.items():
                size = self.attribute(attr).size
                if any(not 0 <= lv < size for lv in levels):
                    raise UserError(
                        f"schema {self.name!r}: structural zero on {attr} names a level outside 0..{size - 1}"
                    )
        if self.facility_attribute is not None:
            self._check_facility_types(self.attribute(self.facility_attribute))
        elif self.facility_types:
            raise UserError(f"schema {self.name!r}: facilities.unit_types needs an attribute")
        for name in self.report:
            self.query(name)  # a report query must name groupings this schema has
        for column in self.output:
            if len(column.values) != self.attribute(column.attribute).size:
                raise UserError(
                    f"schema {self.name!r}: output column {column.name!r} needs one value per "
                    f"level of {column.attribute!r} ({self.attribute(column.attribute).size})"
                )

    def __getstate__(self) -> dict[str, object]:
        """Pickled (to Spark's tasks) without what it derived: queries, the zero mask."""
        derived = ("_queries", "structural_zero_mask")
        return {k: v for k, v in self.__dict__.items() if k not in derived}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, _queries={})

    def _check_facility_types(self, attribute: Attribute) -> None:
        types = self.facility_types
        if types and (len(types) != attribute.size or min(types) < 0 or types[0] != 0):
            raise UserError(
                f"schema {self.name!r}: facilities.unit_types must give a unit type >= 0 for each "
                f"level of {attribute.name!r} ({attribute.size}), the first 0, got {list(types)}"
            )

    def unit_type_of_levels(self) -> tuple[int, ...]:
        """The unit type of each facility level (``facilities.unit_types``, else level i: i)."""
        if self.facility_attribute is None:
            return ()
        return self.facility_types or tuple(range(self.attribute(self.facility_attribute).size))

    def _check_grouping(self, grouping: Grouping) -> None:
        size = self.attribute(grouping.attribute).size
        members = sorted(level for group in grouping.groups for level in group)
        if members != list(range(size)):
            raise UserError(
                f"schema {self.name!r}: grouping {grouping.name!r} must partition the levels "
                f"0..{size - 1} of {grouping.attribute!r}, got {list(grouping.groups)}"
            )
        if len(grouping.labels) != len(grouping.groups):
            raise UserError(
                f"schema {self.name!r}: grouping {grouping.name!r} needs one label per group"
            )

    # ---- layout -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise UserError(
            f"schema {self.name!r} has no attribute {name!r}; it has {', '.join(a.name for a in self.attributes)}"
        )

    def axis(self, name: str) -> int:
        return [a.name for a in self.attributes].index(self.attribute(name).name)

    def cell_index(self, codes: np.ndarray) -> np.ndarray:
        """Cell index of each row of ``codes`` (n x attributes, each in 0..size-1)."""
        return np.ravel_multi_index(tuple(np.asarray(codes).T), self.shape)

    def cell_codes(self, cells: np.ndarray) -> np.ndarray:
        """Inverse of cell_index: n x attributes codes for each cell index."""
        return np.stack(np.unravel_index(np.asarray(cells), self.shape), axis=1)

    @cached_property
    def structural_zero_mask(self) -> np.ndarray:
        """Boolean vector over cells, True where a structural zero holds."""
        mask = np.zeros(self.shape, dtype=bool)
        for zero in self.structural_zeros:
            index = [np.array(zero.get(a.name, range(a.size))) for a in self.attributes]
            mask[np.ix_(*index)] = True
        return mask.ravel()

    # ---- queries ------------------------------------------------------------------------
    def query(self, name: str) -> Query:
        """The marginal query ``name`` (factors joined by ``*``), built once per schema."""
        factors = self._factors(name)
        by_attribute: dict[str, str] = {}
        for factor in factors:
            attr = self.groupings[factor].attribute if factor in self.groupings else factor
            if attr in by_attribute:
                raise UserError(f"query {name!r} uses attribute {attr!r} twice")
            by_attribute[attr] = factor
        canonical = "*".join(
            by_attribute[a.name] for a in self.attributes if a.name in by_attribute
        )
        if name in ("total", "detailed"):
            canonical = name
        cached = self._queries.get(canonical)
        if cached is None:
            cell_map, size = self._cell_map(by_attribute)
            cached = Query(canonical, tuple(by_attribute.values()), cell_map, size)
            self._queries[canonical] = cached
        factors_given = tuple(by_attribute.values())
        if cached.factors != factors_given:  # the same query, its factors in another order
            return Query(canonical, factors_given, cached.cell_map, cached.size)
        return cached

    def _cell_map(self, by_attribute: Mapping[str, str]) -> tuple[np.ndarray, int]:
        """The query row of every cell (C order over the attributes) and the rows."""
        rows = np.zeros(1, dtype=np.int64)
        size = 1
        for a in self.attributes:
            chosen = by_attribute.get(a.name)
            if chosen is None:
                code, n = np.zeros(a.size, dtype=np.int64), 1
            elif chosen in self.groupings:
                code, n = (
                    self.groupings[chosen].group_of(a.size),
                    len(self.groupings[chosen].groups),
                )
            else:
                code, n = np.arange(a.size, dtype=np.int64), a.size
            rows = (rows[:, None] * n + code[None, :]).ravel()
            size *= n
        rows.setflags(write=False)  # shared by every caller of the cached query
        return rows, size

    def _factors(self, name: str) -> list[str]:
        if name == "total":
            return []
        if name == "detailed":
            return [a.name for a in self.attributes]
        factors = [f.strip() for f in name.split("*")]
        known = {a.name for a in self.attributes} | set(self.groupings)
        for f in factors:
            if f not in known:
                raise UserError(
                    f"query {name!r}: unknown factor {f!r}; schema {self.name!r} allows "
                    f"total, detailed, or products of {', '.join(sorted(known))}"
                )
        return factors


# ---- loading ------------------------------------------------------------------------------
def shipped_schemas() -> list[str]:
    return sorted(
        p.name.removesuffix(".toml")
        for p in resources.files("das.spec.schemas").iterdir()
        if p.name.endswith(".toml")
    )


def load_schema(name_or_path: str | Path) -> Schema:
    """Load a shipped schema by name (``pl94_persons``) or any schema TOML by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml":
        if not path.is_file():
            raise UserError(f"schema file {path} does not exist")
        text, origin = path.read_text(), str(path)
    else:
        if str(name_or_path) not in shipped_schemas():
            raise UserError(
                f"unknown schema {name_or_path!r}; shipped: {', '.join(shipped_schemas())} "
                "(or give a path to a .toml file)"
            )
        text = resources.files("das.spec.schemas").joinpath(f"{name_or_path}.toml").read_text()
        origin = f"das/schemas/{name_or_path}.toml"
    try:
        return schema_from_dict(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{origin}: not valid TOML: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{origin}: {exc}") from exc
    except UserError as exc:
        raise UserError(f"{origin}: {exc}") from exc


_SCHEMA_KEYS = {
    "output",
    "report",
    "name",
    "description",
    "record",
    "filter",
    "attributes",
    "groupings",
    "structural_zeros",
    "facilities",
    "protected_unit",
}
_ATTRIBUTE_KEYS = {"name", "source", "recode", "levels", "offset", "cuts", "valid_range"}


def schema_from_dict(data: Mapping) -> Schema:
    """Build a Schema from the parsed TOML mapping (also used by tests for toy schemas)."""
    unknown = set(data) - _SCHEMA_KEYS
    if unknown:
        raise UserError(f"unknown schema key(s) {sorted(unknown)}; allowed: {sorted(_SCHEMA_KEYS)}")
    attributes = tuple(_attribute(a) for a in data["attributes"])
    groupings = {
        name: Grouping(
            name=name,
            attribute=g["attribute"],
            groups=tuple(tuple(int(v) for v in grp) for grp in g["groups"]),
            labels=tuple(g.get("labels", [f"{name}_{i}" for i in range(len(g["groups"]))])),
        )
        for name, g in data.get("groupings", {}).items()
    }
    zeros = tuple(
        {k: tuple(int(v) for v in vs) for k, vs in z.items()}
        for z in data.get("structural_zeros", [])
    )
    return Schema(
        name=data["name"],
        record=data.get("record", "persons"),
        attributes=attributes,
        groupings=groupings,
        structural_zeros=zeros,
        facility_attribute=_facilities(data).get("attribute"),
        facility_types=tuple(int(t) for t in _facilities(data).get("unit_types", ())),
        record_filter={k: tuple(int(v) for v in vs) for k, vs in data.get("filter", {}).items()},
        output=tuple(_output_column(c, attributes) for c in data.get("output", [])),
        description=data.get("description", ""),
        protected_unit=data.get("protected_unit", ""),
        report=tuple(data.get("report", ())),
    )


def _facilities(data: Mapping) -> Mapping:
    facilities = data.get("facilities", {})
    unknown = set(facilities) - {"attribute", "unit_types"}
    if unknown:
        raise UserError(
            f"facilities: unknown key(s) {sorted(unknown)}; allowed: ['attribute', 'unit_types']"
        )
    return facilities


def _attribute(data: Mapping) -> Attribute:
    unknown = set(data) - _ATTRIBUTE_KEYS
    if unknown:
        raise UserError(
            f"attribute {data.get('name')!r}: unknown key(s) {sorted(unknown)}; "
            f"allowed: {sorted(_ATTRIBUTE_KEYS)}"
        )
    levels = data["levels"]
    if isinstance(levels, str):
        if levels not in LEVEL_GENERATORS:
            raise UserError(
                f"attribute {data['name']!r}: unknown level generator {levels!r}; "
                f"allowed: {', '.join(LEVEL_GENERATORS)}"
            )
        levels = LEVEL_GENERATORS[levels]()
    source = data["source"]
    valid = data.get("valid_range")
    return Attribute(
        name=data["name"],
        levels=tuple(str(v) for v in levels),
        source=(source,) if isinstance(source, str) else tuple(source),
        recode=data["recode"],
        offset=int(data.get("offset", 0)),
        cuts=tuple(int(c) for c in data.get("cuts", ())),
        valid_range=(int(valid[0]), int(valid[1])) if valid else None,
    )


def queries(schema: Schema, names: Sequence[str]) -> list[Query]:
    """Build several queries, refusing duplicates after canonicalisation."""
    built = [schema.query(n) for n in names]
    seen: dict[str, str] = {}
    for n, q in zip(names, built, strict=True):
        if q.name in seen:
            raise UserError(f"queries {seen[q.name]!r} and {n!r} are the same query {q.name!r}")
        seen[q.name] = n
    return built


def _output_column(data: Mapping, attributes: tuple[Attribute, ...]) -> OutputColumn:
    """An output column gives ``values`` per level, or an ``offset`` added to the level index."""
    unknown = set(data) - {"name", "attribute", "values", "offset"}
    if unknown:
        raise UserError(f"output column {data.get('name')!r}: unknown key(s) {sorted(unknown)}")
    size = next((a.size for a in attributes if a.name == data["attribute"]), None)
    if size is None:
        raise UserError(f"output column {data['name']!r}: unknown attribute {data['attribute']!r}")
    if "values" in data:
        values = tuple(int(v) for v in data["values"])
    else:
        values = tuple(range(int(data.get("offset", 0)), int(data.get("offset", 0)) + size))
    return OutputColumn(name=data["name"], attribute=data["attribute"], values=values)
