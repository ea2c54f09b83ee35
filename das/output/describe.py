"""The outputs as a page for users (docs/output.md), rendered from the code that writes them.

The MDF's columns and codes come from the shipped schemas' ``[[output]]`` sections, the
NMF's and the checkpoints' columns from their writers' schemas; the words for each column
and certificate field are kept here, and a test holds them to the code (every field
described, none described that is not written). ``python -m das.output.describe >
docs/output.md`` (``make docs``) regenerates the page; a test holds the committed page
equal to this rendering.
"""

from __future__ import annotations

import sys

from das.estimate.stored import LEAF_QUERY_CELLS
from das.estimate.write import ESTIMATES_SCHEMA, INVARIANTS_SCHEMA
from das.output.microdata import GEOGRAPHY_COLUMNS, microdata_schema
from das.postprocess.levels import CHECKPOINT_SCHEMA
from das.privacy.nmf import NMF_SCHEMA
from das.spark.marks import (
    MODE_KEY,
    PUBLIC_PARQUET,
    SPARK_SCHEMA_KEY,
    TEST_WARNING,
    WARNING_KEY,
)
from das.spec.markdown import markdown_table
from das.spec.schema import Attribute, OutputColumn, Schema, load_schema, shipped_schemas

NMF_COLUMNS = {
    "level": "the geographic level, as the config names it",
    "geocode": "the geounit: its GEOID prefix at the level (empty for a US root), or the "
    "geography file's code for it",
    "query": "the query's name, e.g. `votingage*hispanic*cenrace`",
    "values": "the noisy answer of every cell of the query, in cell order (can be negative)",
    "variance": "the noise variance sigma^2 = 1/rho of this level and query",
    "variance_exact": "the same variance as an exact fraction",
    "rows": "null: `values` holds every cell of the query; else the cells it holds (a sparse "
    "run measures a geounit only where its parent's protected counts can reach)",
}

ESTIMATE_COLUMNS = {
    "level": "the geographic level",
    "geocode": "the geounit",
    "query": "a query measured at the level",
    "estimates": "the estimate of every cell of the query, indexed by the 0-based cell "
    "(can be negative or fractional, but for an answer known exactly)",
    "variances": "their exact variances, aligned; 0 for an answer known exactly (a total held "
    "exact, a known zero). A 90% interval: estimates[i] +- 1.6449 sqrt(variances[i]). At the "
    "block level both arrays hold float32's precision (see above)",
}

INVARIANT_COLUMNS = {
    "level": "a level where the total is held exact, or the block level (`units`)",
    "geocode": "the geounit",
    "query": "`total`, or `units`",
    "values": (
        "`total`: the exact total (one value); `units` (8 values, `gqtype` order): 1 if the "
        "block has a housing unit, else 0, then its number of occupied group-quarters "
        "facilities of each type 1 to 7"
    ),
}

PARENT_COLUMNS = {
    "level": "a level whose geounits' parents the geography file gives",
    "geocode": "the geounit",
    "parent": "its parent's geocode, in the level above",
}

CHECKPOINT_COLUMNS = {
    "geocode": "the geounit",
    "cells": "its protected histogram's nonzero cells, ascending",
    "counts": "the protected count of each of those cells (positive)",
    "solves": "solves of the geounit's parent (on its first child only; 0 on the others)",
    "failsafe": "the failsafe used for the parent and why (null if none)",
    "mip_gap": "the largest relative gap of the parent's roundings to their proven bound",
}

#: The keys of certificate.json, as paths (``<level>``: a key per level; ``[]``: a list).
#: An "exact number" is ``{"exact": "p/q", "approx": float}``.
CERTIFICATE_FIELDS = {
    "run": "the run's name (`run.name`)",
    "mode": "`test` (a fixed seed: never release) or `production`",
    "created": "when the certificate was written (UTC, ISO 8601)",
    "noise_source": "where the noise came from: the secure generator, or the fixed seed",
    "config_file": "the configuration file's path",
    "config": "the effective configuration (overrides applied), as the file's keys in JSON",
    "schema.name": "the histogram schema",
    "schema.cells": "its number of cells",
    "privacy.definition": "the privacy definition and the queries' sensitivity",
    "privacy.protected_unit": "what one record is: a person, a housing unit",
    "privacy.neighbouring": "the neighbouring relation the guarantee holds between",
    "privacy.rho": "the total rho spent (exact number)",
    "privacy.rho_matches_config": "whether the levels' and queries' shares add up exactly "
    "to the configured rho",
    "privacy.delta": "delta of the (epsilon, delta) statement (exact number)",
    "privacy.epsilon_cks": "epsilon at delta (Canonne, Kamath and Steinke's conversion)",
    "privacy.epsilon_bun_steinke": "epsilon at delta (Bun and Steinke's, looser)",
    "privacy.levels.<level>.rho": "the rho spent at the level, as measured (exact number)",
    "privacy.levels.<level>.queries.<query>.rho": "the query's rho at the level (exact number)",
    "privacy.levels.<level>.queries.<query>.sigma2": "its noise variance 1/rho (exact number)",
    "privacy.spent_without_use": "shares spent on an invariant answer (level, query, "
    "share_of_level, rho): measured and published, never used (only where the config opts in)",
    "privacy.bypassed": "the single-child bypass (level, measured_at, query, rho): a level's "
    "query measured once at its only child (the lowest of a chain of only children), with "
    "the rho of both; that rho is counted in measured_at's figures, the level's are 0 there",
    "held_exact.note": 'what "held exact" means',
    "held_exact.invariants": "the input's facts released exactly (outside the guarantee)",
    "held_exact.structural_constraints": "the constraints every output meets exactly",
    "software.<package>": "the version of Python and of each package that ran; "
    "`das_code`: the SHA-256 of das's files (its code and shipped schemas)",
    "records.output_records": "rows of the MDF",
    "records.input_records": "rows of the input's records, only where their total is "
    "invariant (it then equals the MDF's)",
    "postprocessing.solves": "parent problems solved, all levels",
    "postprocessing.failsafes": "failsafe uses, all levels",
    "postprocessing.levels[].level": "the level",
    "postprocessing.levels[].solves": "its parent problems solved",
    "postprocessing.levels[].failsafes": "its failsafe uses: (first child's geocode, reason)",
    "postprocessing.levels[].max_mip_gap": "the largest relative gap of its roundings",
    "postprocessing.levels[].reused": "whether a resumed run reused its checkpoint",
}

#: Certificate dictionaries whose keys are data (a level, a query...), by their path.
CERTIFICATE_KEYS = {
    "privacy.levels": "<level>",
    "privacy.levels.<level>.queries": "<query>",
    "software": "<package>",
}

METRICS_COLUMNS = {
    "level": "the geographic level",
    "source": "`protected` (the MDF's histograms) or `noisy` (the NMF's answers)",
    "query": "the query",
    "size_bin": "geounits by their true population (or `all`)",
    "diversity_bin": "geounits by their true race/ethnicity diversity (or `all`)",
    "cells": "query cells the row's errors are taken over",
    "mae": "mean absolute error per cell",
    "rmse": "root mean squared error per cell",
    "mean_signed": "mean signed error per cell (bias)",
}

#: The confidential directory's files (``--confidential``, by default <output>-confidential).
CONFIDENTIAL_FILES = {
    "report.html": "the error report: one self-contained page (open it in a browser)",
    "metrics.csv": "the error metrics, one row per level, source, query and bins (below)",
    "metrics.json": "the same rows as JSON records",
    "measurement_errors.csv": "the noisy measurements' error sums, taken as the noise is "
    "drawn (a resumed run reports them without measuring again)",
    "input_fingerprint.json": "name, size and hash of every input file, which `--resume` "
    "must match",
    "timings.json": "wall seconds of each phase (`phases_seconds`, in the order they ran) and "
    "of each level's solves (`solve_seconds`): kept here, because they grow with the input",
    "run.log": "the log lines that carry figures of the input (rows read), never printed",
    "solve_seconds/<level>.csv": "each parent's solve seconds (`geocode` of its first child, "
    "`seconds`): the public checkpoints leave them out",
}

_PUBLIC = (
    ("`run.json`", "the effective configuration (without `[spark]`), which `--resume` must match"),
    ("`software.json`", "das's version and code digest (SHA-256 of the package's files) and the "
     "versions of the packages that can change the output, which `--resume` must match"),
    ("`nmf/`", "the noisy measurement file: every query at every geounit, with its variance"),
    ("`invariants/`", "the totals held exact (`strategy.invariants`): one row per geounit of "
     "each level where the total is exact; and each block's units (the group-quarters "
     "bounds); the post-processor reads these, never the input"),
    ("`geography/`", "only where the geography file gives a level codes of its own: each "
     "geounit's parent, at the levels where it is not the GEOID prefix"),
    ("`estimates/`", "the best linear unbiased estimate of every measured query at every "
     "geounit from the whole NMF and the invariants, with its variance (`das estimate`); "
     f"at the block level, the queries of at most {LEAF_QUERY_CELLS} cells (the others: "
     "`das estimate OUTPUT --level L --geocode G`)"),
    ("`geounits/<level>-<geocode>.parquet`", "written by `das estimate --level --geocode`, "
     "not by the run: one geounit's every query, as in `estimates/`, at full precision"),
    ("`levels/<level>/`", "each level's protected histograms (checkpoints: `--resume` restarts "
     "after the last one)"),
    ("`mdf/TABBLKST=../TABBLKCOU=../`", "the protected microdata (MDF), one row per record"),
    ("`certificate.json`, `certificate.md`", "what was spent, how, and what came out; written "
     "only once the outputs have passed validation"),
    ("`tables/`", "written by `das tabulate`, not by the run: the P.L. 94-171 tables of the "
     "MDF, a file per table (docs/users.md)"),
)  # fmt: skip


def render() -> str:
    """The whole page, as Markdown."""
    parts = [
        _intro(),
        _mdf(),
        _nmf(),
        _estimates(),
        _checkpoints(),
        _certificate(),
        _confidential(),
    ]
    return "\n\n".join(parts) + "\n"


def _intro() -> str:
    parquet = ", ".join(f"`{name}/`" for name in PUBLIC_PARQUET)
    return (
        "# The outputs\n\n"
        "<!-- generated by `python -m das.output.describe` (make docs): do not edit -->\n\n"
        "A run writes its public outputs under `--output` and the error metrics against "
        "the input, which are NOT public, under `--confidential` (by default "
        "`<output>-confidential`, never inside the output). Every Parquet file of "
        f"{parquet} says in its footer whether the run was a test (a fixed seed) or "
        f"production: in Spark's schema entry (`{SPARK_SCHEMA_KEY}`, JSON, which Spark reads "
        f"back as column metadata) each column's metadata holds `{MODE_KEY}` = `test` or "
        f'`production`, and in test mode `{WARNING_KEY}` = "{TEST_WARNING}". The files of '
        "`mdf/`, `nmf/` and `estimates/`, which the tasks write with pyarrow, also hold both "
        "as key-value entries of the footer and as each field's metadata, where pyarrow and "
        f'pandas show them (`pyarrow.parquet.read_schema(f).metadata[b"{MODE_KEY}"]`); those '
        "of `levels/`, `invariants/`, `geography/` (and any file Spark writes where pyarrow "
        "cannot open the output: Spark's writer takes no key-value entry of ours) only in "
        "Spark's entry.\n\n" + markdown_table(("path", "content"), _PUBLIC)
    )


def _mdf() -> str:
    schemas = [load_schema(name) for name in shipped_schemas()]
    types = {field.name: field.dataType.simpleString() for field in microdata_schema(schemas[0])}
    geography = [
        (f"`{name}`", types[name], f"{_characters(a, b)} of the block's GEOID")
        for name, (a, b) in GEOGRAPHY_COLUMNS.items()
    ]
    epnum = ("`EPNUM`", types["EPNUM"], "the record's number inside its block, 1..n")
    parts = [
        "## Protected microdata (`mdf/`)\n\n"
        "One row per record of the schema (a person, or a housing unit), written "
        "partitioned by state and county: directories `TABBLKST=44/TABBLKCOU=007/`. "
        "The partition values are strings (`007`, not 7): read with "
        "`das.output.microdata.read_microdata(path)`, or set Spark's "
        "`spark.sql.sources.partitionColumnTypeInference.enabled=false`. The columns "
        "every schema has:\n\n" + markdown_table(("column", "type", "value"), [*geography, epnum])
    ]
    parts += [_schema_columns(schema) for schema in schemas]
    return "\n\n".join(parts)


def _characters(begin: int, end: int) -> str:
    return f"character {end}" if end == begin + 1 else f"characters {begin + 1}..{end}"


def _schema_columns(schema: Schema) -> str:
    types = {field.name: field.dataType.simpleString() for field in microdata_schema(schema)}
    rows = [
        (
            f"`{column.name}`",
            types[column.name],
            f"`{column.attribute}`",
            _codes(column, schema.attribute(column.attribute)),
        )
        for column in schema.output
    ]
    return f"### Schema {schema.name}\n\n{schema.description}.\n\n" + markdown_table(
        ("column", "type", "attribute", "codes"), rows
    )


def _codes(column: OutputColumn, attribute: Attribute) -> str:
    """Each published code and the attribute's levels it stands for."""
    unchanged = tuple(range(attribute.offset, attribute.offset + attribute.size))
    if attribute.recode in ("identity", "offset") and column.values == unchanged:
        source = attribute.source[0]
        first, last = unchanged[0], unchanged[-1]
        return f"{first}..{last}: the input's `{source}`, unchanged (docs/input.md)"
    levels: dict[int, list[str]] = {}
    for level, code in zip(attribute.levels, column.values, strict=True):
        levels.setdefault(code, []).append(level.replace("_", " "))
    return "; ".join(f"{code}: {', '.join(names)}" for code, names in sorted(levels.items()))


def _nmf() -> str:
    rows = [
        (f"`{field.name}`", field.dataType.simpleString(), NMF_COLUMNS[field.name])
        for field in NMF_SCHEMA
    ]
    return (
        "## Noisy measurements (`nmf/`)\n\n"
        "One row per level, geounit and query measured there (the queries of the config's "
        "`[budget.queries.<level>]`): public, never a raw count. Where the levels below the "
        "root hold one geounit each (a US-rooted run of one state), each query a level shares "
        "with its only child is measured once, at the child, with the rho of both (its "
        "`variance` is 1 / their sum): the level has no row for it, and the certificate's "
        "`privacy.bypassed` lists it.\n\n"
        + markdown_table(("column", "type", "meaning"), rows)
    )


def _estimates() -> str:
    rows = [
        (f"`{field.name}`", field.dataType.simpleString(), ESTIMATE_COLUMNS[field.name])
        for field in ESTIMATES_SCHEMA
    ]
    invariants = [
        (f"`{field.name}`", field.dataType.simpleString(), INVARIANT_COLUMNS[field.name])
        for field in INVARIANTS_SCHEMA
    ]
    geography = [(f"`{name}`", "string", meaning) for name, meaning in PARENT_COLUMNS.items()]
    return (
        "## Estimates (`estimates/`), invariants (`invariants/`) and geography (`geography/`)\n\n"
        "One row per level, geounit and query measured at the level: the best linear "
        "unbiased estimate of each of the query's cells (generalised least squares over the "
        "whole tree: every measurement of every geounit, the invariants exact) and its "
        "variance, as two arrays of the query's size (no nulls), computed from "
        "the public `nmf/`, `invariants/`, `geography/` and `run.json` only, so "
        "`das estimate OUTPUT` "
        "recomputes it. One file per group of subtrees, written by the task that "
        "computed it (by Spark where pyarrow cannot open the output's file system); read "
        "the directory, as for every output. "
        "Every level above the block holds every query measured there, at full precision "
        '(float64; the post-processor\'s `target = "blue"` fits read them). The block '
        f"level holds the queries of at most {LEAF_QUERY_CELLS} cells (in P.L. 94-171 every "
        "query but `detailed`, whose 2,016 cells per block would make the directory many "
        "times the NMF's size), with their estimates and variances rounded to float32's "
        "precision (a 24-bit significand: a relative error of at most 6e-8, which moves a "
        "90% interval's ends by under 0.001 of a person for any block answer below 16,000) "
        "and stored as doubles; an answer known exactly keeps its integer estimate and its "
        "variance of 0. `das estimate OUTPUT --level L --geocode G` computes one geounit's "
        "every query (a block's `detailed` too) at full precision from the same public "
        "files, to `OUTPUT/geounits/L-G.parquet` (`root` for an empty geocode) in the "
        "layout below; `das estimate OUTPUT --areas FILE` any union of blocks "
        "(docs/users.md). "
        "Known zeros are imposed too: the schema's structural zeros, and in each block the "
        "levels of the facility attribute it has no unit of (its `units` row), so in every "
        "geounit whose blocks all share them. An answer known exactly (an exact total, a "
        "known zero, a sum of them) has variance 0 and an integer estimate.\n\n"
        + markdown_table(("column", "type", "meaning"), rows)
        + "\n\n`invariants/`: one row per geounit of each level whose total is exact "
        "(query `total`) and, where the schema binds a facility attribute to the unit types "
        "(`hhgq`), one row per block (query `units`): whether it has a housing unit and its "
        "occupied facilities of each type, invariants the certificate lists (it lists what "
        "this directory holds, and the validator checks that the two agree).\n\n"
        + markdown_table(("column", "type", "meaning"), invariants)
        + "\n\n`geography/`: written only where the geography file gives a level codes of "
        "its own (docs/input.md); one row per geounit whose parent is not its GEOID prefix: "
        "every geounit of such a level, and of the level below it. The estimate reads the "
        "tree from it (it finds the other parents by prefix).\n\n"
        + markdown_table(("column", "type", "meaning"), geography)
    )


def _checkpoints() -> str:
    rows = [
        (f"`{field.name}`", field.dataType.simpleString(), CHECKPOINT_COLUMNS[field.name])
        for field in CHECKPOINT_SCHEMA
    ]
    return (
        "## Level checkpoints (`levels/<level>/`)\n\n"
        "One row per geounit of the level, written when the level is solved; the "
        "block level's is what the MDF expands. The columns after `counts` are facts of "
        "the geounit's parent, kept on its first child only.\n\n"
        + markdown_table(("column", "type", "meaning"), rows)
    )


def _certificate() -> str:
    rows = [(f"`{path}`", meaning) for path, meaning in CERTIFICATE_FIELDS.items()]
    return (
        "## Certificate (`certificate.json`, `certificate.md`)\n\n"
        "The JSON for machines, the Markdown the same for people. It holds only the "
        "configuration, protected values and what is held exact, never another raw input "
        "count. `<level>`, `<query>`, `<package>` and `<phase>` stand for one key each; an "
        '"exact number" is `{"exact": "p/q", "approx": float}`.\n\n'
        + markdown_table(("field", "meaning"), rows)
    )


def _confidential() -> str:
    files = [(f"`{name}`", meaning) for name, meaning in CONFIDENTIAL_FILES.items()]
    columns = [(f"`{name}`", meaning) for name, meaning in METRICS_COLUMNS.items()]
    return (
        "## The confidential directory (NOT public)\n\n"
        "Figures against the true counts: not differentially private, never to be "
        "published. The directory is its owner's only (mode 0700, its files 0600, whatever "
        "the umask; on object stores, see docs/cluster.md), and `das validate` warns when "
        "others can read it.\n\n" + markdown_table(("file", "content"), files) + "\n\n"
        "The metrics' columns (a row per bin and each marginal, `all`):\n\n"
        + markdown_table(("column", "meaning"), columns)
    )


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
