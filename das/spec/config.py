"""Run configuration: one TOML file, parsed once at the edge into typed, validated objects.

Library code never reads keys: it receives a ``Config`` whose parts (schema, geography,
budget, strategy) are already built and checked. Every refusal names the file, the key
and what was expected. Any key can be overridden from the command line with
``--set section.key=value`` (the value is read as TOML, falling back to a plain string).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, ValidationError

from das.errors import UserError
from das.spec.budget import Budget, check_invariant_shares, invariant_answers
from das.spec.bypass import Measured, measured
from das.spec.exact import parse_fraction
from das.spec.geography import DEFAULT_LEVELS, Geography
from das.spec.schema import Query, Schema, load_schema

ExactFraction = Annotated[Fraction, BeforeValidator(parse_fraction)]


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        arbitrary_types_allowed=True,
        populate_by_name=True,
    )


class RunSection(_Section):
    name: str
    schema_name: str = Field(alias="schema")
    production: bool = False
    seed: int | None = None


class InputSection(_Section):
    format: Literal["parquet", "csv"] = "parquet"
    persons: str = "persons.parquet"
    units: str = "units.parquet"
    columns: dict[str, str] = {}
    #: The tabulation geography (Parquet; relative to the input directory unless absolute
    #: or a URI). None: ``geography.parquet`` in the input directory if there is one.
    geography: str | None = None
    #: Target areas for the confidential report (Parquet: geoid, target; relative to the
    #: input directory unless absolute or a URI): their protected totals' error by size.
    #: Not part of the run's identity (run.json): it changes no public output.
    targets: str | None = None


class GeographySection(_Section):
    #: [name, prefix length] pairs from the root to the block; TOML has arrays, not tuples.
    levels: list[Annotated[tuple[str, int], Strict(False)]] = list(DEFAULT_LEVELS)


class BudgetSection(_Section):
    rho: ExactFraction
    delta: ExactFraction = Fraction(1, 10**10)
    geolevels: dict[str, ExactFraction]
    queries: dict[str, dict[str, ExactFraction]]
    #: level -> queries whose share is spent knowingly on an answer invariant there
    #: (refused otherwise: das.spec.budget.check_invariant_shares)
    spend_on_invariants: dict[str, list[str]] = {}


class StrategySection(_Section):
    passes: list[list[str]]
    invariants: dict[Literal["total"], str] = {}
    #: Measure each geounit below the root only on the query rows its parent's protected
    #: solution can reach, with noise keyed per row, level after level between the solves
    #: (the DHC persons product: 1,227,744 cells, most of them zero in any parent). False:
    #: every row of every query, all levels before the first solve.
    sparse: bool = False


class PostprocessSection(_Section):
    #: A name in das.solve.solvers.SOLVERS; the job refuses any other before Spark starts.
    solver: str = "structured"
    failsafe: bool = True
    #: The ``total``-only pass fits each child's total to the inverse-variance combination of
    #: every measured query's sum, not to the total query alone (False: the 2020 rule).
    combine_totals: bool = True
    #: With combine_totals, each child's total estimate also takes in what its subtree
    #: measured: its children's estimates summed, bottom-up (das.postprocess.below).
    subtree_totals: bool = True
    #: What each family's L2 fit targets: the tree-wide BLUE of ``estimates/`` (weighted by
    #: its variances) or the noisy measurements (today's rule; with combine_totals false,
    #: the 2020 rule). Default "measurements" so that older configs keep their meaning.
    target: Literal["blue", "measurements"] = "measurements"
    #: Accept an integer rounding within this relative L1 gap of the proven bound (0: optimum).
    mip_gap: float = Field(default=1e-3, ge=0.0, le=1.0)
    #: Guard (seconds) per rounding MIP; the MIPs stop on node limits (das.solve.rounding).
    mip_time_limit: float = Field(default=120.0, gt=0.0)
    #: The output directory of a finished run of another product that this run's output
    #: must agree with (the 2020 DHC-P agreed with the P.L. 94-171 microdata): every
    #: geounit's ``agree_on`` counts are held equal to that run's, exactly.
    agree_with: str | None = None
    #: The query of this schema whose rows are the other product's cells, in order.
    agree_on: str | None = None


class SparkSection(_Section):
    master: str = "local[*]"
    #: Memory of the local driver JVM (das run only; it also runs the local executors).
    driver_memory: str = Field(default="4g", pattern=r"^[0-9]+[kmgt]$")
    shuffle_partitions: int = Field(default=8, ge=1)
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = "ERROR"


class ConfigFile(_Section):
    run: RunSection
    input: InputSection = InputSection()
    geography: GeographySection = GeographySection()
    budget: BudgetSection
    strategy: StrategySection
    postprocess: PostprocessSection = PostprocessSection()
    spark: SparkSection = SparkSection()


@dataclass(frozen=True)
class Config:
    """A validated run configuration with its derived objects built."""

    path: str
    file: ConfigFile
    schema: Schema
    geography: Geography
    budget: Budget
    queries: Mapping[str, tuple[Query, ...]]  # per level, in measurement order
    passes: tuple[tuple[str, ...], ...]
    total_invariant_level: str | None  # the total is exact from the root down to this level
    #: The levels bypassed as their parent's only child (``das.spec.bypass``): set by the
    #: run once the input's geounits are counted (``with_chain``), or by a reader from the NMF.
    chain: tuple[str, ...] = ()

    @cached_property
    def measured(self) -> Measured:
        """Each level's measured queries and their rho, after the single-child bypass."""
        return measured(self.budget, self.geography.names, self.chain)

    def with_chain(self, chain: tuple[str, ...]) -> Config:
        """This configuration for an input whose levels ``chain`` are bypassed."""
        return self if chain == self.chain else replace(self, chain=chain)

    @property
    def seed(self) -> int | None:
        return self.file.run.seed

    @property
    def production(self) -> bool:
        return self.file.run.production


# ---- loading ------------------------------------------------------------------------------
def load_config(path: str | Path, overrides: Sequence[str] = (), seed: int | None = None) -> Config:
    """Read, override, validate and build a run configuration; UserError on any problem."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file {path} does not exist")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from exc
    applied = {apply_override(raw, item): item for item in overrides}
    if seed is not None:
        raw.setdefault("run", {})["seed"] = seed
    return build_config(raw, str(path), applied)


def apply_override(raw: dict[str, Any], item: str) -> str:
    """Apply one ``--set a.b.c=value`` to the raw mapping, in place; return its key."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise UserError(f"--set {item!r}: expected key=value, e.g. --set budget.rho=1/2")
    parts = key.strip().split(".")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    if isinstance(value, float) and not math.isfinite(value) and "e" in text.lower():
        value = text.strip()  # 1e400 overflows TOML's float: its text is an exact number
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UserError(f"--set {item!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value
    return ".".join(parts)


def build_config(
    raw: Mapping[str, Any], origin: str, overrides: Mapping[str, str] | None = None
) -> Config:
    """The typed configuration of ``raw``, read from ``origin``; ``overrides`` maps each key
    that ``--set`` gave to its argument, so that an error the flag caused names the flag."""
    overrides = overrides or {}
    try:
        file = ConfigFile.model_validate(raw)
    except ValidationError as exc:
        raise UserError(_describe(exc, origin, overrides)) from None
    try:
        return _derive(file, origin)
    except UserError as exc:
        mentioned = [item for key, item in overrides.items() if _names(key, str(exc))]
        given = " ".join(f"--set {item}" for item in overrides.values())
        source = f"--set {mentioned[0]}" if mentioned else f"{origin} {given}".strip()
        raise UserError(f"{source}: {exc}") from None


def _names(key: str, message: str) -> bool:
    """Whether ``message`` names ``key`` or a section holding it (budget.geolevels for
    budget.geolevels.us: the sum of its shares), as a whole dotted name."""
    parts = key.split(".")
    prefixes = [".".join(parts[:n]) for n in range(len(parts), 1, -1)] or [key]
    return any(re.search(_whole(prefix), message) for prefix in prefixes)


def _whole(key: str) -> str:
    """A pattern of ``key`` as a whole dotted name (budget.rho, not budget.rho_x)."""
    return rf"(?<![\w.]){re.escape(key)}(?![\w])"


def _describe(exc: ValidationError, origin: str, overrides: Mapping[str, str]) -> str:
    lines, from_file = [], False
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        item = next((i for k, i in overrides.items() if re.match(_whole(k), key)), None)
        from_file = from_file or item is None
        where = key if item is None else f"--set {item}"
        if err["type"] == "extra_forbidden":
            lines.append(f"  {where}: unknown key")
        elif err["type"] == "missing":
            lines.append(f"  {where}: required key is missing")
        else:
            message = err["msg"].removeprefix("Value error, ")
            got = "" if "got " in message else f" (got {err.get('input')!r})"
            lines.append(f"  {where}: {message}{got}")
    header = f"{origin}: invalid configuration" if from_file else "invalid configuration"
    return "\n".join([header, *lines])


def _derive(file: ConfigFile, origin: str) -> Config:
    if file.run.production and file.run.seed is not None:
        raise UserError(
            "run.production = true refuses a fixed seed (run.seed or --seed): production noise "
            "must come from the operating system's secure generator and no seed may exist"
        )
    if file.strategy.sparse and file.postprocess.target == "blue":
        raise UserError(
            'strategy.sparse = true needs postprocess.target = "measurements": a sparse run '
            "measures each geounit only on the rows its parent's solution reaches, and the "
            "BLUE (estimates/) needs every row of every query"
        )
    post = file.postprocess
    subtree = post.combine_totals and post.subtree_totals and ["total"] in file.strategy.passes
    if file.strategy.sparse and subtree:
        raise UserError(
            "strategy.sparse = true needs postprocess.subtree_totals = false when a pass "
            'fits "total" alone: the subtree totals are a bottom-up pass over every row '
            "of the NMF, and a sparse run measures each geounit only on its parent's support"
        )
    schema_ref = file.run.schema_name
    if schema_ref.endswith(".toml") and not Path(schema_ref).is_absolute():
        schema_ref = str(Path(origin).parent / schema_ref)
    schema = load_schema(schema_ref)
    geography = Geography.from_pairs(file.geography.levels)
    if set(file.budget.geolevels) != set(geography.names):
        raise UserError(
            f"budget.geolevels must give a share for exactly the levels {geography.names}, "
            f"got {sorted(file.budget.geolevels)}"
        )
    queries = {
        level: _level_queries(schema, level, shares)
        for level, shares in file.budget.queries.items()
    }
    budget = Budget(
        rho=file.budget.rho,
        delta=file.budget.delta,
        level_shares=dict(file.budget.geolevels),
        query_shares=file.budget.queries,
    )
    passes = _passes(file.strategy.passes, queries)
    _check_agreement(file.postprocess, schema)
    invariant_level = file.strategy.invariants.get("total")
    if invariant_level is not None:
        geography.level(invariant_level)
    invariant = invariant_answers(schema, geography.names, queries, invariant_level)
    spent = check_invariant_shares(budget, invariant, file.budget.spend_on_invariants)
    budget = replace(budget, spent_on_invariants=spent)
    return Config(
        path=origin,
        file=file,
        schema=schema,
        geography=geography,
        budget=budget,
        queries=queries,
        passes=passes,
        total_invariant_level=invariant_level,
    )


def _check_agreement(section: PostprocessSection, schema: Schema) -> None:
    if (section.agree_with is None) != (section.agree_on is None):
        raise UserError(
            "postprocess.agree_with and postprocess.agree_on go together: the run to agree "
            "with, and the query of this schema whose rows are that run's cells"
        )
    if section.agree_on is not None:
        try:
            schema.query(section.agree_on)
        except UserError as exc:
            raise UserError(f"postprocess.agree_on: {exc}") from None


def _level_queries(schema: Schema, level: str, shares: Mapping[str, Fraction]) -> tuple[Query, ...]:
    built = []
    for name in shares:
        try:
            query = schema.query(name)
        except UserError as exc:
            raise UserError(f"budget.queries.{level}.{name}: {exc}") from None
        if query.name != name:
            raise UserError(f"budget.queries.{level}.{name}: write this query as {query.name!r}")
        rows = query.cell_map  # one row per cell: a partition, unless out of range
        if rows.shape != (schema.size,) or rows.min() < 0 or rows.max() >= query.size:
            raise UserError(
                f"budget.queries.{level}.{name}: the query does not partition the cells"
            )
        built.append(query)
    return tuple(built)


def _passes(
    passes: list[list[str]], queries: Mapping[str, tuple[Query, ...]]
) -> tuple[tuple[str, ...], ...]:
    flat = [q for p in passes for q in p]
    if len(set(flat)) != len(flat):
        raise UserError(f"strategy.passes: a query appears in more than one pass: {passes}")
    measured = {q.name for qs in queries.values() for q in qs}
    missing = measured - set(flat)
    if missing:
        raise UserError(f"strategy.passes: measured queries {sorted(missing)} are in no pass")
    unknown = set(flat) - measured
    if unknown:
        raise UserError(f"strategy.passes: queries {sorted(unknown)} are measured at no level")
    return tuple(tuple(p) for p in passes)
