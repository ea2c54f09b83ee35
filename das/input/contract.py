"""The input contract as data: the two tables, their columns, keys and cross-table rules.

This is what ``das fixture`` writes and ``das run`` accepts. The loader, the check, the
reader, the validator and the fixtures' own check all take it from here. What a schema
decides is derived from the schema, never restated: which columns its attributes read,
from which table, and the narrower domain an attribute gives its column.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from das.spec.schema import Attribute, Schema

#: Spark type names the reader casts a column to; the check's type rule uses the same.
KINDS = ("long", "int", "boolean", "string")

#: The values a boolean column may hold, written as text (any case, surrounding spaces
#: ignored): exactly the strings Spark's cast to boolean reads, so the check and the reader
#: agree. Any other value (an integer 2, "1.0", "maybe") is refused, never cast to true.
BOOLEAN_TRUE = ("true", "t", "yes", "y", "1")
BOOLEAN_FALSE = ("false", "f", "no", "n", "0")
BOOLEAN_ALLOWED = (
    f"a boolean: true/false or 1/0 (as text: {'/'.join(BOOLEAN_TRUE)} or "
    f"{'/'.join(BOOLEAN_FALSE)}, in any case)"
)

#: How a file may store a column of each kind (Arrow type families of its Parquet footer);
#: the check then tests every value. Anything else (dates, floats for a boolean, nested
#: types) is refused per file before any cast.
STORED_AS: dict[str, tuple[str, ...]] = {
    "long": ("integer", "floating", "decimal", "string", "null"),
    "int": ("integer", "floating", "decimal", "string", "null"),
    "boolean": ("boolean", "integer", "string", "null"),
    "string": ("string", "integer", "null"),
}


@dataclass(frozen=True)
class Column:
    """One column of a contract table and the values it may hold."""

    name: str
    kind: str
    """Spark type name the reader casts to: one of ``KINDS``."""
    domain: tuple[int, int] | None = None
    """Integers allowed (inclusive) where no schema attribute narrows them."""
    pattern: str | None = None
    """Regular expression every value of a string column matches."""
    pattern_allowed: str = ""
    """The pattern in words, for the refusal message."""
    optional: bool = False
    """Read, checked and required only where a schema's attribute reads it (``table_for``):
    one input serves every product, each ignoring the columns it does not read."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: kind {self.kind!r}; allowed: {KINDS}")
        if self.domain is not None and self.kind not in ("long", "int"):
            raise ValueError(f"column {self.name!r}: a domain needs an integer kind")
        if (self.pattern is not None) != (self.kind == "string"):
            raise ValueError(f"column {self.name!r}: a string column needs a pattern")

    @property
    def is_integer(self) -> bool:
        return self.kind in ("long", "int")


@dataclass(frozen=True)
class Table:
    """One input table: its columns in file order and the column each row is keyed by."""

    name: str
    key: str
    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        if self.key not in self.names:
            raise ValueError(f"table {self.name!r}: key {self.key!r} is not one of its columns")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"table {self.name!r} has no column {name!r}")


#: What a rule tests: a value is present, matches its pattern, has its type, lies in its
#: domain; a key is unique; a row links rightly to the other table; a record lies outside
#: the schema's structural zeros.
TESTS = ("null", "format", "type", "domain", "key", "link", "zero")


@dataclass(frozen=True)
class Rule:
    """One rule of the contract, as the refusal report names and explains it.

    ``column`` is the column the report shows and ``allowed`` what it should have held;
    ``domain`` is the range a ``domain`` rule allows. A ``zero`` rule names its structural
    zero as (attribute, levels) pairs and shows every source column of them (``shown``).
    """

    name: str
    table: str
    column: str
    allowed: str
    test: str
    domain: tuple[int, int] | None = None
    zero: tuple[tuple[str, tuple[int, ...]], ...] = ()
    shown: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"rule {self.name!r}: test {self.test!r}; allowed: {TESTS}")
        if (self.domain is not None) != (self.test == "domain"):
            raise ValueError(f"rule {self.name!r}: a domain rule, and only it, has a domain")
        if bool(self.zero) != (self.test == "zero"):
            raise ValueError(f"rule {self.name!r}: a zero rule, and only it, has a zero")

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a refusal shows for each offending row."""
        return self.shown or (self.column,)


GEOID = Column(
    "geoid",
    "string",
    pattern=r"^[0-9]{15}$",
    pattern_allowed="a 15-digit block GEOID (state 2 + county 3 + tract 6 + block 4)",
)

PERSONS = Table(
    name="persons",
    key="person_id",
    columns=(
        Column("person_id", "long"),
        Column("unit_id", "long"),
        GEOID,
        Column("age", "int", domain=(0, 115)),
        Column("hispanic", "boolean"),
        Column("cenrace", "int", domain=(1, 63)),
        # The DHC persons product's (schema dhcp_persons); a P.L. 94-171 run ignores them.
        Column("sex", "int", domain=(1, 2), optional=True),  # the 2020 QSEX: 1 male, 2 female
        Column("relgq", "int", domain=(0, 41), optional=True),  # relationship or GQ type
    ),
)

UNITS = Table(
    name="units",
    key="unit_id",
    columns=(
        Column("unit_id", "long"),
        GEOID,
        Column("gqtype", "int", domain=(0, 7)),  # 0 housing unit, 1..7 group-quarters types
        Column("occupied", "boolean"),
    ),
)

TABLES = (PERSONS, UNITS)

#: Columns only a unit has: a persons schema reads them from the person's unit (joined by
#: ``UNITS.key``, which every person row names).
UNIT_ONLY_COLUMNS = tuple(name for name in UNITS.names if name not in PERSONS.names)


def _unit_types() -> int:
    domain = UNITS.column("gqtype").domain
    if domain is None or domain[0] != 0:
        raise ValueError("gqtype must be coded 0..n-1")
    return domain[1] + 1


#: Unit types (gqtype codes): the length of each geounit's units invariant.
UNIT_TYPES = _unit_types()


#: Rules that link a row to rows of the other table (persons to their unit), in report order.
LINK_RULES = (
    Rule("unknown-unit", "persons", "unit_id", "the unit_id of a row of units", "link"),
    Rule(
        "geoid-differs-from-unit",
        "persons",
        "geoid",
        "the geoid of the person's unit (its housing unit or GQ facility is in another block)",
        "link",
    ),
    Rule("person-in-vacant-unit", "persons", "unit_id", "a unit marked occupied", "link"),
    Rule(
        "occupied-unit-without-residents",
        "units",
        "occupied",
        "occupied = false for a unit nobody lives in",
        "link",
    ),
    Rule(
        "gq-residents-not-occupied",
        "units",
        "occupied",
        "occupied = true for a group-quarters facility with residents",
        "link",
    ),
)


def table_for(schema: Schema, table: Table) -> Table:
    """The table as a run of ``schema`` reads it: without the optional columns none of the
    schema's attributes reads (from this table)."""
    read = {
        source
        for attribute in schema.attributes
        if attribute_table(schema, attribute) == table.name
        for source in attribute.source
    }
    kept = tuple(c for c in table.columns if not c.optional or c.name in read)
    return table if len(kept) == len(table.columns) else Table(table.name, table.key, kept)


def unit_type_rules(schema: Schema, table: Table) -> tuple[Rule, ...]:
    """A persons schema whose facility attribute is read from the person, with levels in
    several unit types (``facilities.unit_types``): each person's level lies in the type of
    the person's unit (a householder in a housing unit, a GQ type in a facility of its
    major type)."""
    attribute_name = schema.facility_attribute
    if attribute_name is None or not schema.facility_types or table.name != PERSONS.name:
        return ()
    attribute = schema.attribute(attribute_name)
    if attribute_table(schema, attribute) != PERSONS.name:
        return ()
    source = attribute.source[0]
    return (
        Rule(
            f"{source}-differs-from-unit-gqtype",
            PERSONS.name,
            source,
            f"a {attribute.name} level of the person's unit's type (gqtype 0, a housing unit: "
            f"levels {_levels_of_type(schema, 0)}; gqtype t > 0: the levels of GQ type t)",
            "link",
            shown=(source, "gqtype"),
        ),
    )


def _levels_of_type(schema: Schema, kind: int) -> str:
    levels = [lv for lv, t in enumerate(schema.unit_type_of_levels()) if t == kind]
    return (
        f"{levels[0]}..{levels[-1]}"
        if levels == list(range(levels[0], levels[-1] + 1))
        else (", ".join(map(str, levels)))
    )


def key_rule(table: Table) -> Rule:
    """Each row's key is unique in its table."""
    name = f"duplicate-{table.key.replace('_', '-')}"
    return Rule(name, table.name, table.key, f"a unique {table.key}", "key")


def type_rule(table: Table, column: Column) -> Rule:
    """An integer or boolean column holds values of its kind (a string column has a format)."""
    allowed = f"an integer ({column.kind})" if column.is_integer else BOOLEAN_ALLOWED
    return Rule(f"{column.name}-type", table.name, column.name, allowed, "type")


def column_rules(schema: Schema, table: Table, column: Column) -> tuple[Rule, ...]:
    """Null, then format (strings) or type and domain (integers, booleans) of one column."""
    name = column.name
    null = Rule(f"null-{name}", table.name, name, "a value (not null)", "null")
    if column.pattern is not None:
        return null, Rule(f"{name}-format", table.name, name, column.pattern_allowed, "format")
    rules = [null, type_rule(table, column)]
    bounds = column_domain(schema, table, column)
    if bounds is not None:
        allowed = f"an integer from {bounds[0]} to {bounds[1]}"
        rules.append(Rule(f"{name}-domain", table.name, name, allowed, "domain", bounds))
    return tuple(rules)


def table_rules(schema: Schema, table: Table) -> tuple[Rule, ...]:
    """Every rule of a table, in report order: its columns', its key's, its links, then the
    schema's structural zeros (on the table of its records)."""
    read = table_for(schema, table)
    return (
        *(rule for column in read.columns for rule in column_rules(schema, table, column)),
        key_rule(table),
        *(rule for rule in LINK_RULES if rule.table == table.name),
        *unit_type_rules(schema, table),
        *zero_rules(schema, table),
    )


# ---- what the schema decides --------------------------------------------------------------
def attribute_table(schema: Schema, attribute: Attribute) -> str:
    """The table an attribute's record reads its source columns from.

    A units schema reads units; a persons schema reads persons, except an attribute of
    unit-only columns, which it reads from the person's unit.
    """
    if schema.record == UNITS.name or set(attribute.source) <= set(UNIT_ONLY_COLUMNS):
        return UNITS.name
    return PERSONS.name


def attribute_domain(attribute: Attribute) -> tuple[int, int] | None:
    """The integers an attribute's recode accepts from its one source column (None: any)."""
    if attribute.recode == "identity":
        return 0, attribute.size - 1
    if attribute.recode == "offset":
        return attribute.offset, attribute.offset + attribute.size - 1
    if attribute.recode == "cut" and attribute.valid_range is not None:
        return attribute.valid_range
    return None


def carried_attributes(schema: Schema, table: Table, column: Column) -> tuple[Attribute, ...]:
    """The schema's attributes that read ``column`` of ``table`` alone, in schema order."""
    return tuple(
        attribute
        for attribute in schema.attributes
        if attribute.source == (column.name,) and attribute_table(schema, attribute) == table.name
    )


def column_domain(schema: Schema, table: Table, column: Column) -> tuple[int, int] | None:
    """The integers a column may hold: the first of its schema attributes that bounds it,
    else the contract's own domain."""
    for attribute in carried_attributes(schema, table, column):
        bounds = attribute_domain(attribute)
        if bounds is not None:
            return bounds
    return column.domain


# ---- structural zeros ---------------------------------------------------------------------
def zero_rules(schema: Schema, table: Table) -> tuple[Rule, ...]:
    """One rule per structural zero of the schema, on the table of its records: a record
    whose codes fall in the zero's cell(s) cannot exist, so it is refused, never moved."""
    if schema.record != table.name:
        return ()
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    for zero in schema.structural_zeros:
        attributes = [a for a in schema.attributes if a.name in zero]
        name = "structural-zero-" + "-".join(a.name for a in attributes)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:  # two zeros on the same attributes: numbered from the second
            name += f"-{seen[name]}"
        shown = tuple(dict.fromkeys(c for a in attributes for c in a.source)) or (table.key,)
        cell = " and ".join(_levels_in_words(a, zero[a.name]) for a in attributes) or "any value"
        allowed = (
            f"a record outside the structural zero of schema {schema.name!r}: no record has {cell}"
        )
        pairs = tuple((a.name, tuple(zero[a.name])) for a in attributes)
        rules.append(Rule(name, table.name, shown[0], allowed, "zero", zero=pairs, shown=shown))
    return tuple(rules)


def _levels_in_words(attribute: Attribute, levels: tuple[int, ...]) -> str:
    """``votingage=under_18 (age 0..17)``: the levels, and the source values they stand for."""
    names = "|".join(attribute.levels[level] for level in levels)
    values = " or ".join(_level_values(attribute, level) for level in levels)
    return f"{attribute.name}={names} ({values})" if values else f"{attribute.name}={names}"


def _level_values(attribute: Attribute, level: int) -> str:
    """The source values one level of an attribute's recode stands for ("" if many columns)."""
    source = attribute.source[0]
    if attribute.recode == "identity":
        return f"{source} {level}"
    if attribute.recode == "offset":
        return f"{source} {level + attribute.offset}"
    if attribute.recode == "bool":
        return f"{source} {'true' if level else 'false'}"
    if attribute.recode == "cut":
        low, high = attribute.valid_range or (None, None)
        cuts = attribute.cuts
        lo = cuts[level - 1] if level > 0 else low
        hi = cuts[level] - 1 if level < len(cuts) else high
        if lo is None:
            return f"{source} <= {hi}"
        if hi is None:
            return f"{source} >= {lo}"
        return f"{source} {lo}..{hi}"
    return ""


# ---- the geography file (optional) --------------------------------------------------------
#: The file the run reads the tabulation geography from, in the input directory, unless
#: the config's ``input.geography`` names another. Without it, the geounits are the blocks
#: the units name and their GEOID prefixes.
GEOGRAPHY_FILE = "geography.parquet"

#: The tabulation geography: every block of the run, populated or not, one row each. A
#: column named after a level between the root and the block (``county``, ``tract``, ...)
#: gives each block's geounit at that level; a level without one takes the GEOID prefix.
GEOGRAPHY = Table(name="geography", key="geoid", columns=(GEOID,))

#: Rule: every unit's block is a block of the geography.
UNKNOWN_BLOCK = Rule(
    "block-not-in-geography", "units", "geoid", "a block listed in the geography file", "link"
)


def code_column(level: str) -> Column:
    """A geography column holding the code of each block's geounit at ``level``."""
    return Column(
        level,
        "string",
        pattern=r"^[0-9A-Za-z_.-]{1,40}$",
        pattern_allowed=f"the code of the block's {level} geounit: 1 to 40 letters, digits, "
        "'.', '_' or '-'",
    )


def geography_table(coded: tuple[str, ...]) -> Table:
    """The geography file's columns: the block GEOID, then the levels it gives codes of."""
    return Table(GEOGRAPHY.name, GEOGRAPHY.key, (GEOID, *(code_column(name) for name in coded)))


def nesting_rule(level: str, parent: str) -> Rule:
    """All the blocks of a geounit lie in one geounit of the level above."""
    return Rule(
        f"{level}-in-one-{parent}",
        GEOGRAPHY.name,
        level,
        f"one {parent} for all the blocks of a {level} (each {level} code with one {parent} code)",
        "link",
        shown=(level, parent),
    )


def root_rule(root: str) -> Rule:
    """Every block lies in the run's one root geounit (a run rooted below the US)."""
    return Rule(
        f"one-{root}",
        GEOGRAPHY.name,
        root,
        f"the {root} of the first block: a run rooted at {root} has one {root} geounit",
        "link",
    )


def geography_rules(
    schema: Schema, levels: tuple[str, ...], coded: tuple[str, ...], root_prefix: bool
) -> tuple[Rule, ...]:
    """Every rule of a geography file with codes for ``coded``, in report order.

    ``levels`` are the run's levels from root to block. A nesting rule is checked between
    two levels below the root and above the block where either has codes of its own (GEOID
    prefixes nest by themselves; a block is one row, its parents one per column);
    ``root_prefix``: the root is a GEOID prefix of positive length (one state, say).
    """
    table = geography_table(coded)
    middle = levels[1:-1]
    nesting = tuple(
        nesting_rule(level, parent)
        for parent, level in itertools.pairwise(middle)
        if level in coded or parent in coded
    )
    return (
        *(rule for column in table.columns for rule in column_rules(schema, table, column)),
        key_rule(table),
        *nesting,
        *((root_rule(levels[0]),) if root_prefix else ()),
    )
