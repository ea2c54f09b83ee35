"""The session's settings, checked without Spark: ``--conf`` pairs win over the config's
section and the module's own; Spark's start-up banner is configured away."""

from __future__ import annotations

import os
import stat
from importlib import resources
from pathlib import Path

import pytest

from das.errors import UserError
from das.spark import session
from das.spark.session import parse_spark_conf, spark_session
from das.spec.config import SparkSection


def test_conf_pairs_are_split_at_the_first_equals_sign():
    pairs = ["spark.executor.memory=8g", "spark.driver.extraJavaOptions=-Da=b -Dc=d", "spark.x="]
    assert parse_spark_conf(pairs) == (
        ("spark.executor.memory", "8g"),
        ("spark.driver.extraJavaOptions", "-Da=b -Dc=d"),
        ("spark.x", ""),
    )


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("spark.executor.memory", r"^--conf 'spark.executor.memory': expected key=value, a Spark "
         r"setting such as spark.executor.memory=4g$"),
        ("=4g", r"^--conf '=4g': expected key=value"),
        ("spark.a b=1", r"^--conf 'spark.a b=1': expected key=value"),
        ("executor.memory=4g", r"^--conf 'executor.memory=4g': 'executor.memory' is not a Spark "
         r"setting \(Spark's keys start with \"spark.\""),
    ],
)  # fmt: skip
def test_a_malformed_conf_pair_is_refused(pair: str, message: str):
    with pytest.raises(UserError, match=message):
        parse_spark_conf([pair])


class _Builder:
    def __init__(self, calls: list[tuple[str, str]]) -> None:
        self.calls = calls

    def appName(self, name: str) -> _Builder:
        return self

    def master(self, master: str) -> _Builder:
        self.calls.append(("spark.master", master))
        return self

    def config(self, key: str, value: str) -> _Builder:
        self.calls.append((key, value))
        return self

    def getOrCreate(self) -> _Session:
        return _Session(self.calls)


class _Session:
    def __init__(self, calls: list[tuple[str, str]]) -> None:
        self.conf, self.sparkContext = self, self
        self.calls, self.master = calls, "local[*]"

    def set(self, key: str, value: str) -> None:
        self.calls.append((key, value))

    def isModifiable(self, key: str) -> bool:
        return key.startswith("spark.sql.")

    def setLogLevel(self, level: str) -> None: ...


def test_conf_pairs_win_over_the_configs_spark_section(monkeypatch: pytest.MonkeyPatch):
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(session.SparkSession, "builder", _Builder(calls))
    monkeypatch.setattr(session, "_launched_by_spark_submit", lambda: False)
    conf = [("spark.sql.shuffle.partitions", "3"), ("spark.driver.memory", "1g")]
    spark_session(SparkSection(driver_memory="4g", shuffle_partitions=8), "t", conf)
    last = {}
    for key, value in calls:
        last[key] = value
    assert last["spark.sql.shuffle.partitions"] == "3" and last["spark.driver.memory"] == "1g"
    # the section's values were set, then overridden: the pairs come after them
    assert calls.index(("spark.driver.memory", "4g")) < calls.index(("spark.driver.memory", "1g"))
    assert calls[-1] == ("spark.sql.shuffle.partitions", "3")  # reset at run time, modifiable


def _properties() -> dict[str, str]:
    text = resources.files("das.spark").joinpath("log4j2.properties").read_text()
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and line[0] != "#")
    return {key.strip(): value.strip() for key, value in pairs}


def test_spark_has_no_default_log_level_to_announce():
    """Spark takes the console's level from PySpark's gateway logger (WARN when it has
    none) and prints "Setting default log level to ..." when it differs from the root's."""
    props = _properties()
    loggers = {
        props[key]: props[key.replace(".name", ".level")]
        for key in props
        if key.startswith("logger.") and key.endswith(".name")
    }
    gateway = loggers["org.apache.spark.api.python.PythonGatewayServer"]
    assert gateway == props["rootLogger.level"] == "error"


class _RuntimeConf:
    """Spark's runtime conf as far as ``setting`` uses it."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        del self.values[key]


class _RuntimeSession:
    def __init__(self, values: dict[str, str]):
        self.conf = _RuntimeConf(values)


def test_a_setting_holds_inside_its_block_and_is_restored_after_it():
    spark = _RuntimeSession({"spark.a": "1"})
    with session.setting(spark, "spark.a", "2"), session.setting(spark, "spark.b", "x"):
        assert spark.conf.values == {"spark.a": "2", "spark.b": "x"}
    assert spark.conf.values == {"spark.a": "1"}
    with pytest.raises(RuntimeError), session.setting(spark, "spark.a", "3"):
        raise RuntimeError("a failed action")
    assert spark.conf.values == {"spark.a": "1"}


def _session_calls(monkeypatch: pytest.MonkeyPatch, conf=()) -> dict[str, str]:
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(session.SparkSession, "builder", _Builder(calls))
    monkeypatch.setattr(session, "_launched_by_spark_submit", lambda: False)
    spark_session(SparkSection(), "t", conf)
    return dict(calls)


def test_a_local_session_keeps_its_shuffle_files_in_a_private_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    monkeypatch.setattr(session.tempfile, "tempdir", str(tmp_path))
    before = os.umask(0)
    try:
        scratch = Path(_session_calls(monkeypatch)[session.LOCAL_DIR])
    finally:
        os.umask(before)
    assert scratch.parent == tmp_path and stat.S_IMODE(scratch.stat().st_mode) == 0o700


def test_a_local_directory_the_user_chose_is_kept(monkeypatch, tmp_path):
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    chosen = _session_calls(monkeypatch, [(session.LOCAL_DIR, "/scratch")])
    assert chosen[session.LOCAL_DIR] == "/scratch"
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/scratch2")  # Spark's own variable wins anyway
    assert session.LOCAL_DIR not in _session_calls(monkeypatch)
