"""Creating the Spark session: embedded ``local[*]`` by default, whatever spark-submit says otherwise.

The job never assumes it runs locally: when launched by ``spark-submit --master ...`` the
master is already in the Spark conf and the config's ``spark.master`` is ignored. Settings
given on the command line (``--conf key=value``) are applied after the config's ``[spark]``
section and this module's own, so they win.
"""

from __future__ import annotations

import atexit
import io
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources

from pyspark import SparkContext
from pyspark.sql import SparkSession

from das.errors import UserError
from das.spec.config import SparkSection

log = logging.getLogger("das.spark")


#: Adaptive execution merges small shuffle partitions by bytes, but here the cost is Python
#: work per row (noise per geounit, a solve per family), not bytes: it merges a level's
#: whole measurement, or most of its solves, into one task that holds one core while the
#: others idle. Off: every shuffle keeps spark.shuffle_partitions.
COALESCE = "spark.sql.adaptive.coalescePartitions.enabled"


#: A Spark setting from the command line: (key, value).
SparkSetting = tuple[str, str]


def parse_spark_conf(pairs: Sequence[str]) -> tuple[SparkSetting, ...]:
    """``--conf`` arguments as (key, value); a malformed one is the user's error, before Spark."""
    settings = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or " " in key:
            raise UserError(
                f"--conf {pair!r}: expected key=value, a Spark setting such as "
                "spark.executor.memory=4g"
            )
        if not key.startswith("spark."):
            raise UserError(
                f"--conf {pair!r}: {key!r} is not a Spark setting (Spark's keys start with "
                '"spark.", e.g. spark.executor.memory=4g; Hadoop\'s are spark.hadoop.*)'
            )
        settings.append((key, value))
    return tuple(settings)


def spark_session(
    settings: SparkSection, app_name: str = "das", conf: Sequence[SparkSetting] = ()
) -> SparkSession:
    """Get (or create) the session with this job's settings applied, then ``conf``'s."""
    builder = SparkSession.builder.appName(app_name)
    embedded = not _launched_by_spark_submit()
    if embedded:
        # Local executors must run the driver's interpreter: numpy/scipy come from it. Under
        # spark-submit the executors' Python is the cluster's choice (spark.pyspark.python,
        # PYSPARK_PYTHON): this driver's path may not exist on the executors' machines.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        log4j = resources.files("das.spark").joinpath("log4j2.properties")
        builder = (
            builder.master(settings.master)
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
            .config("spark.driver.memory", settings.driver_memory)
        )
        if not _local_dir_chosen(conf):
            builder = builder.config(LOCAL_DIR, private_scratch())
    builder = (
        builder.config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Every join here is large on both sides (persons x units, children x parents);
        # size estimates from compressed Parquet made Spark broadcast them and run the
        # driver out of memory, so broadcasting is off.
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.sql.adaptive.autoBroadcastJoinThreshold", "-1")
        # codes such as county "003" are strings: never let a partition directory become 3
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config(COALESCE, "false")
    )
    for key, value in conf:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if embedded and threading.current_thread() is threading.main_thread():
        # PySpark's own Ctrl-C handler cancels the jobs through the gateway connection it
        # has just interrupted (py4j then prints tracebacks of a reentrant call): a plain
        # KeyboardInterrupt instead, and the command stops Spark (das.job.cli).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    spark.conf.set("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
    spark.conf.set(COALESCE, "false")
    for key, value in conf:  # a session that already existed keeps its static settings
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
    spark.sparkContext.setLogLevel(settings.log_level)
    log.debug(
        "spark master %s, %s shuffle partitions",
        spark.sparkContext.master,
        settings.shuffle_partitions,
    )
    return spark


#: Where Spark keeps its shuffle files and blocks spilled to disk: rows of the confidential
#: input while the histograms are built. Made private for each session (``private_scratch``)
#: unless the user chose a place (``--conf spark.local.dir=...`` or ``SPARK_LOCAL_DIRS``).
LOCAL_DIR = "spark.local.dir"


def _local_dir_chosen(conf: Sequence[SparkSetting]) -> bool:
    return "SPARK_LOCAL_DIRS" in os.environ or any(key == LOCAL_DIR for key, _ in conf)


def private_scratch() -> str:
    """A new directory only its owner can enter (0700, whatever the umask), removed when
    this process exits: Spark writes its shuffle files 0644, so the directory above them
    is what keeps them from other users."""
    path = tempfile.mkdtemp(prefix="das-spark-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


class JvmStderr(io.TextIOBase):
    """The stderr of the JVM that spark-submit started. Its launcher runs the Python driver
    with stderr merged into stdout and copies both to the JVM's stdout, so progress and
    errors meant for stderr are handed to the JVM's own stderr instead (through the gateway
    spark-submit opened; the driver's stderr if it is gone)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        try:
            SparkContext._ensure_initialized()
            err = SparkContext._jvm.System.err  # type: ignore[union-attr]
            err.print(text)
            err.flush()
        except Exception:  # the gateway is closed (the JVM is exiting): say it anyway
            sys.stderr.write(text)
        return len(text)


def _launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._active_spark_context is not None


@contextmanager
def setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Spark's SQL setting ``key`` at ``value`` for the actions run inside the block (Spark
    plans a query when its action runs), restored after it."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
