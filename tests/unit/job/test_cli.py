"""The ``das`` command's user errors: exit code 2 and one clear paragraph, no trace, no
Spark, and the file tree exactly as it was.

``test_each_user_error_exits_2_before_spark`` enumerates every case the command refuses
before Spark starts; the cases that need Spark are in tests/system/test_refusals.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import re
import shutil
import socket
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from _pytest.mark import ParameterSet
from pyspark import SparkContext

from das.errors import InternalError, UserError
from das.job import run
from das.job.cli import main, parser
from das.job.files import LocalFiles
from das.job.record import (
    FINGERPRINT_JSON,
    RUN_JSON,
    SOFTWARE_JSON,
    config_text,
    input_fingerprint,
)
from das.output.software import RESULT_PACKAGES, code_digest, run_software
from das.spark import session
from das.spark.marks import RunMode
from das.spec.config import load_config
from tests.conftest import ROOT
from tests.helpers import exit_code, file_tree, tiny_input, write_input

DEMO = str(ROOT / "configs" / "demo.toml")
PRODUCTION = str(ROOT / "configs" / "pl94_2020_production.toml")


def test_cluster_down_without_a_cluster_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "down", "--state", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"das: error: no cluster state at {tmp_path}/cluster.json")


def test_cluster_up_refuses_bad_ports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["cluster", "up", "--state", str(tmp_path), "--worker-ports", "70a"]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "das: error: --worker-ports takes comma-separated port numbers, got '70a'\n"
    )


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "spark_session", refuse)
    monkeypatch.setattr(run, "spark_session", refuse)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid input; an empty directory, a file, a non-empty directory; and a run started
    with the demo config and seed 1 (run.json, and the fingerprint in its sibling). Shared:
    every test asserts that it left the tree as it found it."""
    tmp_path = tmp_path_factory.mktemp("world")
    write_input(tmp_path / "in", *tiny_input())
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("x")
    config = load_config(DEMO, seed=1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / RUN_JSON).write_text(config_text(config))
    (tmp_path / "run" / SOFTWARE_JSON).write_text(json.dumps(run_software()))
    (tmp_path / "run-confidential").mkdir()
    fingerprint = input_fingerprint(LocalFiles(), str(tmp_path / "in"), config)
    (tmp_path / "run-confidential" / FINGERPRINT_JSON).write_text(json.dumps(fingerprint))
    (tmp_path / "bad.toml").write_text("[run\n")
    (tmp_path / "latin1.toml").write_bytes("[run]\nname = 'd\xe9mo'\n".encode("latin-1"))
    (tmp_path / "no_units").mkdir()
    shutil.copy(tmp_path / "in" / "persons.parquet", tmp_path / "no_units")
    write_input(tmp_path / "other", *tiny_input(seed=1))
    busy = {"pid": os.getpid(), "host": socket.gethostname(), "started": "2026-12-04T22:00:00+00:00"}
    (tmp_path / "busy.lock").write_text(json.dumps(busy))  # a live run writes {t}/busy
    (tmp_path / "in2").mkdir()
    (tmp_path / "in2" / "persons.parquet").mkdir()
    (tmp_path / "in2" / "persons.parquet" / "_SUCCESS").write_text("")
    (tmp_path / "in2" / "units.parquet").write_text("")
    return tmp_path


def _run(
    *args: str, config: str = DEMO, input_dir: str = "{t}/in", output: str = "{t}/new"
) -> list[str]:
    """``das run`` with a seed, every path valid unless given."""
    return ["run", config, "--input", input_dir, "--output", output, "--seed", "1", *args]


def _case(name: str, argv: list[str], message: str) -> ParameterSet:
    """One refusal: argv with {t} for the test's directory, the start of stderr (regex)."""
    return pytest.param(argv, message, id=name)


def _fixture(*args: str) -> list[str]:
    return ["fixture", "synthetic", "--persons", "5", "--seed", "1", *args]


def _resume(input_dir: str, seed: str = "1", *args: str) -> list[str]:
    return ["run", DEMO, "--input", input_dir, "--output", "{t}/run", "--seed", seed,
            "--resume", *args]  # fmt: skip


APART = "the error metrics against the input must stay apart from the public output"
USAGE = r"(?s)usage: das .*\n"
CASES = [
    # arguments (argparse: the usage, then the error)
    _case("no arguments", ["run"],
          USAGE + "das run: error: the following arguments are required: config, --input"),
    _case("seed not a number", ["run", DEMO, "--input", "i", "--output", "o", "--seed", "x"],
          USAGE + "das run: error: argument --seed: invalid int value: 'x'"),
    _case("unknown command", ["publish"],
          USAGE + "das: error: argument command: invalid choice: 'publish'"),
    _case("fixture without --out", _fixture(),
          USAGE + "das fixture synthetic: error: the following arguments are required: --out"),
    _case("-v and -q together", _run("-v", "-q"),
          USAGE + "das run: error: argument -q/--quiet: not allowed with argument -v/--verbose"),
    _case("--conf without a value", _run("--conf"),
          USAGE + "das run: error: argument --conf: expected one argument"),
    # Spark settings (--conf), refused before anything else
    _case("--conf without =", _run("--conf", "spark.executor.memory"),
          r"das: error: --conf 'spark.executor.memory': expected key=value, a Spark setting "
          r"such as spark.executor.memory=4g$"),
    _case("--conf, not a Spark key", _run("--conf", "executor.memory=4g"),
          r"das: error: --conf 'executor.memory=4g': 'executor.memory' is not a Spark setting "
          r"\(Spark's keys start with \"spark.\""),
    _case("--conf, empty key", _run("--conf", "=4g"),
          r"das: error: --conf '=4g': expected key=value"),
    _case("validate, bad --conf", ["validate", "--input", "{t}/in", "--output", "{t}/run",
                                   "--conf", "spark.ui.enabled"],
          r"das: error: --conf 'spark.ui.enabled': expected key=value"),
    # configuration
    _case("config file missing", _run(config="{t}/nope.toml"),
          r"das: error: config file .*/nope.toml does not exist$"),
    _case("config not TOML", _run(config="{t}/bad.toml"),
          r"das: error: .*/bad.toml: not valid TOML: Expected ']' at the end of a table"),
    _case("config not UTF-8", _run(config="{t}/latin1.toml"),
          r"das: error: .*/latin1.toml: not valid TOML: 'utf-8' codec can't decode byte 0xe9"),
    _case("unknown config key", _run("--set", "budget.rhoo=1"),
          r"das: error: invalid configuration\n  --set budget.rhoo=1: unknown key$"),
    _case("--set, zero denominator", _run("--set", "budget.rho=1/0"),
          r"das: error: invalid configuration\n  --set budget.rho=1/0: expected a fraction "
          r"with a nonzero denominator, got '1/0'$"),
    _case("--set, beyond a float", _run("--set", "budget.rho=1e400"),
          r"das: error: invalid configuration\n  --set budget.rho=1e400: expected a number "
          r"below 1.8e308, got '1e400'$"),
    _case("--set, not an integer", _run("--set", "spark.shuffle_partitions=x"),
          r"das: error: invalid configuration\n  --set spark.shuffle_partitions=x: Input "
          r"should be a valid integer \(got 'x'\)$"),
    _case("--set, a share that breaks its section's sum", _run("--set", "budget.geolevels.us=1"),
          r"das: error: --set budget.geolevels.us=1: budget.geolevels: shares must sum to "
          r"exactly 1"),
    _case("--set, a negative budget", _run("--set", "budget.rho=-1"),
          r"das: error: --set budget.rho=-1: budget.rho must be positive, got -1$"),
    _case("--set without =", _run("--set", "budget.rho"),
          r"das: error: --set 'budget.rho': expected key=value"),
    _case("seed in production", _run(config=PRODUCTION),
          r"das: error: .*: run.production = true refuses a fixed seed"),
    _case("unknown solver", _run("--set", "postprocess.solver=gurobi"),
          r"das: error: .*/demo.toml: postprocess.solver: unknown solver 'gurobi'; allowed: "),
    # input
    _case("input missing", _run(input_dir="{t}/none"),
          r"das: error: --input .*/none does not exist: expected a directory holding "
          r"persons.parquet and units.parquet$"),
    _case("input is a file", _run(input_dir="{t}/file"),
          r"das: error: --input .*/file is not a directory$"),
    _case("input empty", _run(input_dir="{t}/empty"),
          r"das: error: --input .*/empty is an empty directory: expected persons.parquet and "
          r"units.parquet in it$"),
    _case("input without a table", _run(input_dir="{t}/no_units"),
          r"das: error: input has no units table: expected .*/no_units/units.parquet"),
    _case("table without data files", _run(input_dir="{t}/in2"),
          r"das: error: .*/in2/persons.parquet: the directory holds no data file"),
    # output and confidential roots
    _case("output not empty", _run(output="{t}/full"),
          r"das: error: output directory .*/full exists and is not empty; choose a new one, "
          r"or pass --resume"),
    # one run at a time per output
    _case("output a live run is writing", _run(output="{t}/busy"),
          r"das: error: --output .*/busy is being written by another das run \(pid \d+ on .*, "
          r"started 2026-12-04T22:00:00\+00:00\); wait for it to end or choose another "
          r"--output \(if no das run is writing it, delete .*/busy.lock\)$"),
    _case("dry run, output a live run is writing", _run("--dry-run", output="{t}/busy"),
          r"das: error: --output .*/busy is being written by another das run"),
    # a dry run refuses what a run refuses before Spark
    _case("dry run, output not empty", _run("--dry-run", output="{t}/full"),
          r"das: error: output directory .*/full exists and is not empty; choose a new one"),
    _case("dry run, input missing", _run("--dry-run", input_dir="{t}/none"),
          r"das: error: --input .*/none does not exist: expected a directory holding"),
    _case("dry run, confidential inside output", _run("--dry-run", "--confidential", "{t}/new/c"),
          rf"das: error: --confidential .*/new/c is inside --output .*/new: {APART}"),
    _case("dry run, unknown solver", _run("--dry-run", "--set", "postprocess.solver=gurobi"),
          r"das: error: .*/demo.toml: postprocess.solver: unknown solver 'gurobi'; allowed: "),
    _case("output is a file", _run(output="{t}/file"),
          r"das: error: --output .*/file is a file; expected a new directory$"),
    _case("output where nothing can be made", _run(output="/proc/das_out"),
          r"das: error: --output /proc/das_out cannot be created: /proc is not writable$"),
    _case("dry run, output where nothing can be made", _run("--dry-run", output="/proc/das_out"),
          r"das: error: --output /proc/das_out cannot be created: /proc is not writable$"),
    _case("confidential where nothing can be made", _run("--confidential", "/proc/das_c"),
          r"das: error: --confidential /proc/das_c cannot be created: /proc is not writable$"),
    _case("output under a file", _run(output="{t}/file/run"),
          r"das: error: --output .*/file/run cannot be created: .*/file is a file, not a "
          r"directory$"),
    _case("confidential not empty", _run("--confidential", "{t}/full"),
          r"das: error: confidential directory .*/full exists and is not empty; choose a new "
          r"one with --confidential"),
    _case("confidential under a file", _run("--confidential", "{t}/file/c"),
          r"das: error: --confidential .*/file/c cannot be created: .*/file is a file"),
    _case("confidential = output", _run("--confidential", "{t}/new"),
          rf"das: error: --confidential .*/new is the output directory itself .*/new: {APART}"),
    _case("confidential inside output", _run("--confidential", "{t}/new/c"),
          rf"das: error: --confidential .*/new/c is inside --output .*/new: {APART}"),
    _case("output inside confidential", _run("--confidential", "{t}"),
          rf"das: error: --confidential .* holds --output .*/new: {APART}"),
    # resume
    _case("resume without a run", _run("--resume"),
          r"das: error: --resume: .*/new holds no run to resume \(no run.json\)$"),
    _case("resume, fingerprint elsewhere", _resume("{t}/in", "1", "--confidential", "{t}/empty"),
          r"das: error: --resume: .*/empty holds no fingerprint of the input the run in "
          r".*/run was started with"),
    _case("resume, other seed", _resume("{t}/in", "2"),
          r"das: error: --resume: the configuration differs from the one .*/run was started "
          r"with \(run.seed was 1, now 2\); resume with the same config, overrides and seed$"),
    _case("resume, other budget", _resume("{t}/in", "1", "--set", "budget.rho=1"),
          r'das: error: --resume: the configuration differs .*\(budget.rho was '
          r'"293764/114921", now "1"\)'),
    _case("resume, other input", _resume("{t}/other"),
          r"das: error: --resume: the input in .*/other differs from the one .*/run was "
          r"started with \(changed: persons.parquet, units.parquet\); resume with the same "
          r"input, or start a new run$"),
    # validate
    _case("validate, output missing", ["validate", "--input", "{t}/in", "--output", "{t}/none"],
          r"das: error: --output .*/none is not a directory holding a das run$"),
    _case("validate, no run.json", ["validate", "--input", "{t}/in", "--output", "{t}/empty"],
          r"das: error: .*/empty holds no das run \(no run.json\)$"),
    _case("validate, input missing", ["validate", "--input", "{t}/none", "--output", "{t}/run"],
          r"das: error: --input .*/none does not exist"),
    _case("validate, another input", ["validate", "--input", "{t}/other", "--output", "{t}/run"],
          r"das: error: --input .*/other is not the input the run in .*/run was made from "
          r"\(changed: persons.parquet, units.parquet, by the fingerprint in "
          r".*/run-confidential/input_fingerprint.json\); validate a run against its own input$"),
    # fixtures
    _case("fixture onto a file", _fixture("--out", "{t}/file"),
          r"das: error: --out .*/file is a file; expected a directory \(created if missing\)$"),
    _case("fixture under a file", _fixture("--out", "{t}/file/in"),
          r"das: error: --out .*/file/in cannot be created: .*/file is a file, not a directory$"),
    _case("fixture, negative size", ["fixture", "synthetic", "--persons", "-1", "--seed", "1",
                                     "--out", "{t}/fx"],
          r"das: error: --persons must be >= 0, got -1$"),
    _case("fixture, source missing", ["fixture", "blocks", "{t}/none.parquet", "--seed", "1",
                                      "--out", "{t}/fx"],
          r"das: error: block-count source .*/none.parquet does not exist"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), CASES)
def test_each_user_error_exits_2_before_spark(
    world: Path, no_spark: None, capsys: pytest.CaptureFixture[str], argv, message
) -> None:
    before = file_tree(world)
    assert exit_code(lambda: main([a.replace("{t}", str(world)) for a in argv])) == 2
    err = capsys.readouterr().err
    assert re.match(message, err), err
    assert "Traceback" not in err and "\n\n" not in err.strip()
    assert file_tree(world) == before  # nothing written, nothing removed


class _Spark:
    def stop(self) -> None: ...


def _validate(world: Path, monkeypatch: pytest.MonkeyPatch, result: object) -> int:
    def validate_run(spark: object, input_dir: str, output: str) -> list[str]:
        if isinstance(result, Exception):
            raise result
        return list(result)  # type: ignore[call-overload]

    monkeypatch.setattr(session, "spark_session", lambda *a, **k: _Spark())
    monkeypatch.setattr("das.confidential.validation.validate_run", validate_run)
    monkeypatch.setattr("das.output.validate.run_mode", lambda spark, output: RunMode.of(1))
    return main(["validate", "--input", str(world / "in"), "--output", str(world / "run")])


def test_validate_exits_0_when_valid(world, monkeypatch, capsys):
    assert _validate(world, monkeypatch, []) == 0
    assert capsys.readouterr().out.startswith(f"{world}/run: valid; ")


def test_validate_exits_2_with_the_broken_checks(world, monkeypatch, capsys):
    broken = ["EPNUM is not 1..n inside a block: 1 row(s), e.g. ...", "CENRACE outside [1, 2]"]
    assert _validate(world, monkeypatch, broken) == 2
    assert capsys.readouterr().err == (
        f"das: error: {world}/run: not valid, 2 broken check(s):\n"
        "  EPNUM is not 1..n inside a block: 1 row(s), e.g. ...\n"
        "  CENRACE outside [1, 2]\n"
    )


def test_validate_exits_1_on_a_bug(world, monkeypatch, capsys):
    assert _validate(world, monkeypatch, InternalError("an aggregation returned no row")) == 1
    assert capsys.readouterr().err.startswith(
        "das: internal error (this is probably a bug in das): an aggregation returned no row"
    )


def test_run_help_states_where_the_confidential_metrics_go(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "default: <output>-confidential, a sibling of --output; never inside it" in help_text


def test_every_command_s_help_says_what_it_does(capsys):
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    assert "check a finished run's outputs against its input" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "A 90% interval is estimate +- 1.6449 sqrt(variance)." in help_text


@pytest.mark.parametrize(
    ("error", "code", "first"),
    [
        (InternalError("the solver broke"), 1, "das: internal error (this is probably a bug"),
        (UserError("infeasible"), 2, "das: error: infeasible"),
    ],
)
def test_the_notes_of_a_failed_run_are_printed(world, monkeypatch, capsys, error, code, first):
    note = f"das wrote to {world}/new and {world}/new-confidential before it stopped: ..."

    def failing(*args, **kwargs):
        error.add_note(note)
        raise error

    monkeypatch.setattr(run, "run_job", failing)
    assert main(["run", DEMO, "--input", f"{world}/in", "--output", f"{world}/new"]) == code
    first_line, second_line = capsys.readouterr().err.splitlines()
    assert first_line.startswith(first) and second_line == note


# ---- conventions: --version, -v/-q anywhere, --conf, --dry-run, jobs/topdown.py -------------
def test_version_names_das_its_code_and_the_packages_that_change_results(capsys):
    assert exit_code(lambda: main(["--version"])) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == f"das {metadata.version('das')} ({code_digest()})"
    assert re.fullmatch(r"das \S+ \(sha256:[0-9a-f]{64}\)", first)
    assert second == ", ".join(f"{p} {metadata.version(p)}" for p in RESULT_PACKAGES)
    assert RESULT_PACKAGES == ("pyspark", "numpy", "highspy", "numba", "scipy")


def _commands(top: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every (sub)command's parser, with its path from ``das``."""
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


def test_every_command_takes_v_and_q_after_its_name():
    found = dict(_commands(parser()))
    assert {"run", "validate", "fixture", "cluster"} <= {p[0] for p in found}
    for path, sub in found.items():
        flags = {s for a in sub._actions for s in a.option_strings}
        assert {"-v", "--verbose", "-q", "--quiet"} <= flags, path


@pytest.mark.parametrize(
    ("where", "verbose", "quiet"),
    [
        (["-v", "run", DEMO, "--input", "i", "--output", "o"], True, False),
        (["run", DEMO, "--input", "i", "--output", "o", "-v"], True, False),
        (["run", "-q", DEMO, "--input", "i", "--output", "o"], False, True),
        (["-q", "fixture", "synthetic", "--persons", "1", "--seed", "1", "--out", "x"], False, True),
        (["fixture", "synthetic", "--persons", "1", "--seed", "1", "--out", "x", "-v"], True, False),
        (["cluster", "down", "--verbose"], True, False),
        (["run", DEMO, "--input", "i", "--output", "o"], False, False),
    ],
)
def test_v_and_q_are_taken_before_and_after_the_command(where, verbose, quiet):
    args = parser().parse_args(where)
    assert (args.verbose, args.quiet) == (verbose, quiet)


def test_a_dry_run_prints_the_plan_and_starts_nothing(world, no_spark, capsys):
    before = file_tree(world)
    argv = [a.replace("{t}", str(world)) for a in _run("--dry-run", "-q")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("das run demo: the plan (dry run: no Spark, nothing read or written)")
    assert "  total (6 levels, 64 queries)" in out and "epsilon = 17.1436" in out
    assert f"{world}/new/mdf/" in out and f"{world}/new-confidential/report.html" in out
    assert file_tree(world) == before


def test_conf_pairs_reach_the_spark_session(world, monkeypatch, capsys):
    seen = {}

    def spark_session(settings, app_name, conf=()):
        seen["conf"] = conf
        raise UserError("stopped here")

    monkeypatch.setattr(run, "spark_session", spark_session)
    argv = _run("--conf", "spark.executor.memory=8g", "--conf", "spark.sql.shuffle.partitions=3")
    assert main([a.replace("{t}", str(world)) for a in argv]) == 2
    assert seen["conf"] == (("spark.executor.memory", "8g"), ("spark.sql.shuffle.partitions", "3"))
    assert capsys.readouterr().err == "das: error: stopped here\n"


def _topdown() -> ModuleType:
    spec = importlib.util.spec_from_file_location("topdown", ROOT / "jobs" / "topdown.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_topdown_takes_every_das_run_flag(world, no_spark, capsys):
    """spark-submit's script passes its arguments to ``das run``: new flags work through it."""
    topdown = _topdown()
    argv = [DEMO, "--input", f"{world}/in", "--output", f"{world}/new", "--seed", "1",
            "--set", "budget.delta=1e-9", "--confidential", f"{world}/secret",
            "--conf", "spark.executor.memory=8g", "--dry-run", "-v"]  # fmt: skip
    assert topdown.main(argv) == 0
    out = capsys.readouterr().out
    assert f"{world}/secret/report.html" in out and "delta = 1e-09" in out
    assert topdown.main([*argv[:-2], "--conf", "nonsense"]) == 2
    assert capsys.readouterr().err.startswith("das: error: --conf 'nonsense': expected key=value")
    run_flags = {s for a in dict(_commands(parser()))[("run",)]._actions for s in a.option_strings}
    assert {"--confidential", "--conf", "--dry-run", "--resume", "--set", "--seed"} <= run_flags


def test_a_run_ends_with_its_summary(world, monkeypatch, capsys):
    from das.output.certificate import Records, build_certificate

    config = load_config(DEMO, seed=1)
    certificate = build_certificate(config, noise_source="seed", records=Records(7), levels=[])
    geounits = {name: 1 for name in config.geography.names}
    result = run.RunResult(f"{world}/new", certificate, geounits)
    monkeypatch.setattr(run, "run_job", lambda *args, **kwargs: result)
    assert _topdown().main([DEMO, "--input", f"{world}/in", "--output", f"{world}/new"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"das run demo: done in \d+s; TEST MODE", lines[0])
    assert lines[1] == "  persons:   7 in the protected microdata"
    assert lines[-3].endswith(f"{world}/new-confidential/report.html  (confidential: never publish)")


@pytest.mark.parametrize(
    ("note", "line"),
    [
        ("das wrote to /o before it stopped: delete it before running again, or run the same "
         "command with --resume to continue from the last checkpoint",
         "das: interrupted (Ctrl-C); das wrote to /o before it stopped: delete it before "
         "running again, or run the same command with --resume to continue from the last "
         "checkpoint\n"),
        (None, "das: interrupted (Ctrl-C) before anything was written; nothing to clean up\n"),
    ],
)  # fmt: skip
def test_ctrl_c_ends_a_run_with_one_line_and_exit_130(world, monkeypatch, capsys, note, line):
    def stopped(*args: object, **kwargs: object) -> None:
        error = KeyboardInterrupt()
        if note:
            error.add_note(note)
        raise error

    monkeypatch.setattr(run, "run_job", stopped)
    # a session of this test process (another file's) is not the run's to stop
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    assert main([a.replace("{t}", str(world)) for a in _run()]) == 130
    assert capsys.readouterr() == ("", line)
    assert not (world / "new.lock").exists()


def test_tracebacks_of_an_interrupted_jvm_call_are_left_out():
    """What py4j logs when Ctrl-C cuts a call into the JVM: the interrupt itself, or an
    error raised while handling it (a broken pipe); other errors are kept."""
    from das.job.console import _without_interrupts

    def record(error: BaseException) -> logging.LogRecord:
        return logging.LogRecord("py4j", logging.ERROR, "x", 1, "m", None, (type(error), error, None))

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise BrokenPipeError(32, "Broken pipe")  # noqa: B904  (as py4j does)
    except BrokenPipeError as during:
        assert not _without_interrupts(record(during))
    assert not _without_interrupts(record(KeyboardInterrupt()))
    assert _without_interrupts(record(OSError("disk full")))
    assert _without_interrupts(logging.LogRecord("das", logging.INFO, "x", 1, "m", None, None))
