"""The ``das`` command: build fixtures, run the TopDown job, validate and tabulate its output.

A user's mistake (bad argument, config, input or path) prints one clear message and exits
with code 2, as does ``das validate`` on an output that is not valid (a result, not a bug);
a bug (InternalError) exits with code 1 and says it is a bug. Notes added on the way up
(which directories a failed run wrote to) are printed after the message. The same
argument parser serves ``jobs/topdown.py`` under spark-submit. ``-v``/``-q`` are taken
before the command and after it (``das run -v ...``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from das.errors import InternalError, UserError
from das.job.design import add_design_arguments, design_command
from das.job.nmf_command import add_nmf_arguments, nmf_command

log = logging.getLogger("das")


def version_text() -> str:
    """das's version and code digest, then the versions of the packages that can change its
    results: what a run records for ``--resume`` (das.output.software)."""
    from das.output.software import run_software

    found = run_software()
    das, code = found.pop("das"), found.pop("das_code")
    return f"das {das} ({code})\n" + ", ".join(f"{name} {v}" for name, v in found.items())


class _Version(argparse.Action):
    """``--version``: the versions are looked up only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version_text())
        parser.exit()


def logging_options(before_command: bool = False) -> argparse.ArgumentParser:
    """-v/-q for ``parents=``. After a command their default is SUPPRESS, so that the
    command's parser does not reset a flag given before it (``das -v run ...``)."""
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_mutually_exclusive_group()
    default = False if before_command else argparse.SUPPRESS
    group.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="debug logging"
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="warnings and errors only: no progress lines (results are still printed)",
    )
    return options


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A (sub)command that takes -v/-q after its name too; its ``--help`` opens with
    ``description`` (by default the one line ``das --help`` lists it with)."""
    return commands.add_parser(
        name, help=help, description=description or help, parents=[logging_options()]
    )


def add_conf_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. --conf spark.executor.memory=8g (repeatable); wins over "
        "the config's [spark] section",
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of a TopDown run, shared by ``das run`` and ``jobs/topdown.py``."""
    parser.add_argument("config", help="run configuration (TOML), e.g. configs/demo.toml")
    parser.add_argument(
        "--input", required=True, help="directory with the persons and units tables"
    )
    parser.add_argument(
        "--output", required=True, help="directory for the public outputs (must be new or empty)"
    )
    parser.add_argument(
        "--confidential",
        metavar="DIR",
        help="directory for the error metrics against the input, NOT public (must be new or "
        "empty; default: <output>-confidential, a sibling of --output; never inside it)",
    )
    parser.add_argument(
        "--seed", type=int, help="fixed noise seed (test mode; refused in production)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set budget.rho=1/2 (repeatable)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output: reuse its noisy measurements and finished levels",
    )
    add_conf_argument(parser)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (levels, queries, rho per level and query, epsilon, where each "
        "output goes) after the checks made before Spark, and exit; starts no Spark",
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="das",
        description=__doc__.splitlines()[0],
        parents=[logging_options(before_command=True)],
    )
    top.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="print das's version and those of the packages that can change its results",
    )
    commands = top.add_subparsers(dest="command", required=True)

    run = add_command(commands, "run", "run the TopDown job locally (embedded Spark)")
    add_run_arguments(run)

    validate = add_command(commands, "validate", "check a finished run's outputs against its input")
    validate.add_argument("--input", required=True, help="the run's input directory")
    validate.add_argument("--output", required=True, help="the run's output directory")
    validate.add_argument(
        "--confidential",
        metavar="DIR",
        help="the run's confidential directory (default: <output>-confidential): its "
        "input fingerprint must match --input",
    )
    add_conf_argument(validate)

    audit = add_command(commands, "audit", "reconstruction audit of a finished run (confidential)")
    audit.add_argument("--input", required=True, help="the run's input directory")
    audit.add_argument("--output", required=True, help="the run's output directory")
    audit.add_argument(
        "--confidential",
        metavar="DIR",
        help="the run's confidential directory (default: <output>-confidential); audit.json "
        "is written there",
    )
    add_conf_argument(audit)

    check = add_command(commands, "check", "check an input against the contract, nothing else")
    check.add_argument("config", help="run configuration (TOML): the schema and the input files")
    check.add_argument("--input", required=True, help="directory with the persons and units tables")
    check.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key, e.g. --set input.format=csv (repeatable)",
    )  # fmt: skip
    add_conf_argument(check)

    estimate = add_command(
        commands,
        "estimate",
        "recompute a run's estimates/ (BLUE) from its public files",
        "Recompute OUTPUT/estimates/ from the run's public files alone (nmf/, invariants/, "
        "run.json, and geography/ where the run published it): the best linear unbiased "
        "estimate of every measured query at every geounit, with its exact variance. A 90% "
        "interval is estimate +- 1.6449 sqrt(variance).",
    )
    estimate.add_argument("output", help="the run's output directory (nmf/, invariants/, run.json)")
    estimate.add_argument(
        "--areas", metavar="FILE",
        help="a block-assignment file (GEOID, then a column per kind of area): each area's "
        "estimate, exact variance and 90%% interval of every table line and measured query, "
        "to OUTPUT/areas/<column>.parquet (estimates/ is left as it is)",
    )  # fmt: skip
    estimate.add_argument(
        "--level", metavar="L",
        help="with --geocode: one geounit's estimate and exact variance of every query "
        "measured at its level, at full precision (the block's detailed too, which "
        "estimates/ leaves out), to OUTPUT/geounits/<L>-<G>.parquet",
    )  # fmt: skip
    estimate.add_argument(
        "--geocode", metavar="G", help="the geounit of --level (its GEOID prefix)"
    )  # fmt: skip
    add_conf_argument(estimate)

    add_tabulate_command(commands)

    fixture = add_command(commands, "fixture", "write a deterministic test input")
    kinds = fixture.add_subparsers(dest="kind", required=True)
    blocks = add_command(kinds, "blocks", "expand real block counts into persons and units")
    blocks.add_argument("path", help="block-count Parquet, e.g. ri_2010_block.parquet")
    blocks.add_argument("--seed", type=int, required=True)
    blocks.add_argument("--out", required=True)
    add_product_arguments(blocks)
    pl94 = add_command(
        kinds, "pl94", "a P.L. 94-171 block table (2018 End-to-End prototype) as records"
    )
    pl94.add_argument("path", help="e.g. ri2018_e2e_pl_prototype_subset.parquet")
    pl94.add_argument("--seed", type=int, required=True)
    pl94.add_argument("--out", required=True)
    add_product_arguments(pl94)
    synthetic = add_command(kinds, "synthetic", "synthetic states of any size and shape")
    synthetic.add_argument("--persons", type=int, required=True)
    synthetic.add_argument("--states", type=int, default=1, help="number of states (default 1)")
    synthetic.add_argument("--counties", type=int, help="counties per state (default: by size)")
    synthetic.add_argument("--tracts", type=int, help="tracts per county (default: by size)")
    synthetic.add_argument(
        "--empty-blocks", metavar="F", help="share of blocks with nobody, e.g. 1/3 (default ~0.4)"
    )
    synthetic.add_argument("--seed", type=int, required=True)
    synthetic.add_argument("--out", required=True)
    add_product_arguments(synthetic)
    add_cluster_arguments(commands)
    add_design_arguments(commands, add_command)
    add_nmf_arguments(commands, add_command)
    return top


def add_tabulate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``das tabulate OUTPUT``: the P.L. 94-171 tables of a finished run."""
    from das.job.tabulate_args import DESCRIPTION, HELP, add_tabulate_arguments

    tabulate = add_command(commands, "tabulate", HELP, DESCRIPTION)
    add_tabulate_arguments(tabulate)
    add_conf_argument(tabulate)


def add_product_arguments(parser: argparse.ArgumentParser) -> None:
    """``--product`` and ``--households`` of every fixture kind."""
    parser.add_argument(
        "--product",
        choices=("pl94", "dhcp"),
        default="pl94",
        help="pl94 (default): the P.L. 94-171 columns; dhcp: also sex, single-year age and "
        "relationship or GQ type (relgq) of the DHC persons product, from donor households",
    )
    parser.add_argument(
        "--households",
        default="../shared/data/real/pseudopeople_decennial_sample/decennial_census_sample.parquet",
        help="with --product dhcp: pseudopeople's decennial census sample, the donor "
        "households (default: %(default)s)",
    )


def add_cluster_arguments(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``das cluster up|down``: a Spark standalone cluster on 127.0.0.1, for tests and benchmarks."""
    from das.cluster.standalone import DEFAULT_STATE

    cluster = add_command(commands, "cluster", "a Spark standalone cluster on 127.0.0.1")
    actions = cluster.add_subparsers(dest="action", required=True)
    up = add_command(actions, "up", "start a master and workers on 127.0.0.1")
    up.add_argument("--workers", type=int, default=2)
    up.add_argument("--state", default=str(DEFAULT_STATE), help="state, logs and work dirs")
    up.add_argument("--master-port", type=int, default=7077)
    up.add_argument("--webui-port", type=int, default=8080, help="master web UI port")
    up.add_argument("--worker-ports", help="comma-separated (default: master port + 1 + i)")
    up.add_argument("--worker-webui-ports", help="comma-separated (default: web UI port + 1 + i)")
    up.add_argument("--cores", type=int, default=1, help="cores per worker")
    up.add_argument("--memory", default="2g", help="memory per worker")
    down = add_command(actions, "down", "stop exactly the processes `das cluster up` started")
    down.add_argument("--state", default=str(DEFAULT_STATE))


def run_command(args: argparse.Namespace) -> None:
    from das.job.lock import check_unlocked, run_lock
    from das.job.plan import check_plan, render_plan
    from das.job.preflight import run_paths
    from das.job.run import run_job
    from das.job.summary import render_summary
    from das.spark.session import parse_spark_conf
    from das.spec.config import load_config

    start = time.perf_counter()
    spark_conf = parse_spark_conf(args.conf)
    config = load_config(args.config, overrides=args.overrides, seed=args.seed)
    paths = run_paths(args.input, args.output, args.confidential)
    if args.dry_run:
        check_unlocked(paths.output)
        check_plan(config, paths, args.resume)
        print(render_plan(config, paths))
        return
    with run_lock(paths.output):  # one run at a time per output
        result = run_job(
            config,
            args.input,
            args.output,
            resume=args.resume,
            confidential=args.confidential,
            spark_conf=spark_conf,
        )
    elapsed = time.perf_counter() - start
    summary = render_summary(
        config, result.certificate, result.geounits, paths, elapsed, result.geography
    )
    print(summary)


def fixture_command(args: argparse.Namespace) -> None:
    from das.fixtures.dhc import DhcAttributes

    check_fixture_out(args.out)
    dhc = None
    if args.product == "dhcp":
        dhc = DhcAttributes.load(Path(args.households), args.seed)
    if args.kind == "blocks":
        from das.fixtures.blocks import write_blocks_fixture

        summary = write_blocks_fixture(Path(args.path), Path(args.out), args.seed, dhc)
    elif args.kind == "pl94":
        from das.fixtures.pl94 import write_pl94_fixture

        summary = write_pl94_fixture(Path(args.path), Path(args.out), args.seed, dhc)
    else:
        from das.fixtures.synthetic import Shape, share_argument, write_synthetic_fixture

        if args.persons < 0:
            raise UserError(f"--persons must be >= 0, got {args.persons}")
        empty = share_argument(args.empty_blocks)
        shape = Shape(args.states, args.counties, args.tracts, empty)
        summary = write_synthetic_fixture(
            args.persons, Path(args.out), args.seed, shape=shape, dhc=dhc
        )
    print(
        f"fixture written to {args.out}: {summary.persons:,} persons, {summary.units:,} units, "
        f"{summary.blocks:,} blocks"
    )


def check_fixture_out(out: str) -> None:
    """A fixture goes into a directory, new or not (its two files are replaced)."""
    from das.job.files import LocalFiles
    from das.job.preflight import check_new_dir

    files = LocalFiles()
    if files.kind(out) == "file":
        raise UserError(f"--out {out} is a file; expected a directory (created if missing)")
    if files.kind(out) == "missing":
        check_new_dir(files, out, "--out")


def validate_command(args: argparse.Namespace) -> None:
    """Exit 0 and "valid"; exit 2 with the broken checks (a result, not a bug); 1 for a bug."""
    from das.confidential.validation import validate_run
    from das.job.validate import check_validate_paths
    from das.output.validate import run_mode
    from das.spark.session import parse_spark_conf, spark_session
    from das.spec.config import SparkSection

    spark_conf = parse_spark_conf(args.conf)
    check_validate_paths(args.input, args.output, args.confidential)
    # run.json keeps no spark section (it is not part of a run's identity): defaults here
    spark = spark_session(SparkSection(), "das validate", spark_conf)
    problems = validate_run(spark, args.input, args.output)
    if problems:
        raise UserError(
            f"{args.output}: not valid, {len(problems)} broken check(s):\n  "
            + "\n  ".join(problems)
        )
    print(f"{args.output}: valid; {run_mode(spark, args.output).label}")


def check_command(args: argparse.Namespace) -> None:
    """Exit 0 with a summary of a clean input; exit 2 with the per-rule report."""
    from das.job.check import check_only, render_check
    from das.spark.session import parse_spark_conf
    from das.spec.config import load_config

    spark_conf = parse_spark_conf(args.conf)
    config = load_config(args.config, overrides=args.overrides)
    print(render_check(check_only(config, args.input, spark_conf=spark_conf)))


def audit_command(args: argparse.Namespace) -> None:
    from das.job.audit import audit_paths, render_audit, run_audit
    from das.spark.session import parse_spark_conf

    spark_conf = parse_spark_conf(args.conf)
    summary = run_audit(args.input, args.output, args.confidential, spark_conf)
    confidential = audit_paths(args.input, args.output, args.confidential).confidential
    print(render_audit(summary, confidential))


def estimate_command(args: argparse.Namespace) -> None:
    if (args.level is None) != (args.geocode is None):
        raise UserError("das estimate: --level and --geocode go together")
    if args.level is not None and args.areas is not None:
        raise UserError("das estimate: --areas, or --level with --geocode, not both")
    if args.level is not None:
        from das.job.geounit_estimate import geounit_estimate_body

        print(geounit_estimate_body(args.output, args.level, args.geocode))
        return
    if args.areas is not None:
        from das.job.area_estimates import area_estimates_body

        print(area_estimates_body(args.output, args.areas))
        return
    from das.job.estimate import estimate_command_body
    from das.spark.session import parse_spark_conf

    print(estimate_command_body(args.output, parse_spark_conf(args.conf)))


def tabulate_command(args: argparse.Namespace) -> None:
    from das.job.tabulate import TabulateRequest, tabulate_command_body
    from das.spark.session import parse_spark_conf

    request = TabulateRequest(
        args.output, args.areas, args.format, args.input, args.confidential, args.out
    )
    print(tabulate_command_body(request, parse_spark_conf(args.conf)))


def cluster_command(args: argparse.Namespace) -> None:
    from das.cluster.standalone import load_state, start_cluster, stop_cluster

    if args.action == "down":
        stop_cluster(load_state(args.state))
        print("cluster stopped")
        return
    cluster = start_cluster(
        args.workers,
        args.state,
        args.master_port,
        args.webui_port,
        _ports("--worker-ports", args.worker_ports),
        _ports("--worker-webui-ports", args.worker_webui_ports),
        args.cores,
        args.memory,
    )
    print(f"master: {cluster.url}  (web UI {cluster.webui}, state in {cluster.state_dir})")


def _ports(flag: str, text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(p) for p in text.split(",")]
    except ValueError:
        raise UserError(f"{flag} takes comma-separated port numbers, got {text!r}") from None


COMMANDS = {
    "run": run_command,
    "fixture": fixture_command,
    "validate": validate_command,
    "check": check_command,
    "estimate": estimate_command,
    "tabulate": tabulate_command,
    "audit": audit_command,
    "cluster": cluster_command,
    "design": design_command,
    "nmf": nmf_command,
}


def main(argv: Sequence[str] | None = None) -> int:
    from das.job.console import configure_logging, console_stderr, interrupted, stop_spark

    args = parser().parse_args(argv)
    configure_logging(args.verbose, args.quiet)
    try:
        COMMANDS[args.command](args)
    except UserError as exc:
        print(f"das: error: {_with_notes(exc)}", file=console_stderr())
        return 2
    except InternalError as exc:
        print(f"das: {_with_notes(exc)}", file=console_stderr())
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C: what stopped and what to do, no traceback
        stop_spark()
        print(f"das: {interrupted(exc)}", file=console_stderr())
        return 130
    return 0


def _with_notes(exc: Exception) -> str:
    """The message and any note added on the way up (e.g. which directories to delete)."""
    return "\n".join([str(exc), *getattr(exc, "__notes__", [])])


if __name__ == "__main__":
    sys.exit(main())
