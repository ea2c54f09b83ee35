"""Creating the Spark session: embedded ``local[*]`` by default, whatever spark-submit says otherwise.

The job never assumes it runs locally: when launched by ``spark-submit --master ...`` the
master is already in the Spark conf and the config's ``spark.master`` is ignored.
"""

from __future__ import annotations

import logging
import os
import sys
from importlib import resources

from pyspark import SparkContext
from pyspark.sql import SparkSession

from das.spec.config import SparkSection

log = logging.getLogger("das.spark")


#: Adaptive execution merges small shuffle partitions by bytes, but here the cost is Python
#: work per row (noise per geounit, a solve per family), not bytes: on the RI fixture it
#: put the whole block level's measurement into one 20 s task (median task 0.1 s) and most
#: block-level solves into one 15 s task. Off: every shuffle keeps spark.shuffle_partitions.
COALESCE = "spark.sql.adaptive.coalescePartitions.enabled"


def spark_session(settings: SparkSection, app_name: str = "das") -> SparkSession:
    """Get (or create) the session with this job's settings applied."""
    builder = SparkSession.builder.appName(app_name)
    if not _launched_by_spark_submit():
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
    spark = (
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
        .getOrCreate()
    )
    spark.conf.set("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
    spark.conf.set(COALESCE, "false")
    spark.sparkContext.setLogLevel(settings.log_level)
    log.debug(
        "spark master %s, %s shuffle partitions",
        spark.sparkContext.master,
        settings.shuffle_partitions,
    )
    return spark


def _launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands the Python driver its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._active_spark_context is not None
