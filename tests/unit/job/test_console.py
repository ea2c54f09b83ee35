"""Where the command's lines go: results on stdout, progress and errors on stderr, under
spark-submit too; and what a new user must know to find ``das`` at all."""

from __future__ import annotations

import re
import sys

from pyspark import SparkContext

from das.job import cli, console
from das.spark.session import JvmStderr
from tests.conftest import ROOT


class _Err:
    def __init__(self) -> None:
        self.printed: list[str] = []

    def print(self, text: str) -> None:
        self.printed.append(text)

    def flush(self) -> None: ...


class _System:
    def __init__(self) -> None:
        self.err = _Err()


class _Jvm:
    def __init__(self) -> None:
        self.System = _System()


def test_under_spark_submit_errors_go_to_the_jvms_stderr_not_stdout(monkeypatch, capsys):
    """spark-submit merges its Python driver's stderr into the JVM's stdout: what das means
    for stderr is handed to the JVM's own stderr."""
    jvm = _Jvm()
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    monkeypatch.setattr(SparkContext, "_ensure_initialized", classmethod(lambda cls: None))
    monkeypatch.setattr(SparkContext, "_jvm", jvm)
    assert isinstance(console.console_stderr(), JvmStderr)
    assert cli.main(["cluster", "up", "--worker-ports", "70a"]) == 2
    assert "".join(jvm.System.err.printed) == (
        "das: error: --worker-ports takes comma-separated port numbers, got '70a'\n"
    )
    assert capsys.readouterr() == ("", "")


def test_progress_goes_to_stderr_when_run_directly(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert console.console_stderr() is sys.stderr


def test_the_readme_says_das_is_in_the_venv_before_its_first_command():
    readme = (ROOT / "README.md").read_text()
    note = readme.index("source .venv/bin/activate")
    assert note < readme.index("das fixture synthetic")
    makefile = (ROOT / "Makefile").read_text()
    run_target = re.search(r"\nrun: install\n((?:\t.*\n)+)", makefile)
    assert run_target is not None and "bin/activate" in run_target.group(1)


def test_the_readme_says_spark_submit_writes_progress_on_stderr_too():
    readme = (ROOT / "README.md").read_text()
    assert "`das run` writes its progress on stderr" in readme
    assert "spark-submit jobs/topdown.py" in readme.split("writes its progress on stderr")[1][:80]
