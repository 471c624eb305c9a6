"""One way to build a SparkSession for jobs and tests: conf/spark-defaults.conf, Delta Lake, and the rmq source.

Delta's jars come through ``configure_spark_with_delta_pip``, which asks Maven Central for the jars of the pip
package's own version. delta-spark 4.4.1's jars for Spark 4.2 are not on Maven Central (4.4.0 is the newest there),
so the package coordinate is pinned to DELTA_JARS below; the 4.4.1 Python API runs on them unchanged.

The JVM's own console output (the launcher's notes, Ivy's resolution report of those jars, log4j's console
appender, and what the Python workers it forks print) can go to a file instead of the terminal: ``jvm_log``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[1]
SPARK_DEFAULTS = REPO / "conf" / "spark-defaults.conf"
DELTA_JARS = "io.delta:delta-spark_4.2_2.13:4.4.0"


def read_spark_defaults(path: Path = SPARK_DEFAULTS) -> dict[str, str]:
    """``key value`` lines (spark-defaults.conf syntax); blank lines and ``#`` comments skipped."""
    conf: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        conf[key] = value.strip()
    return conf


def build_session(app_name: str, *, master: str | None = None, conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN", jvm_log: Path | None = None) -> SparkSession:
    """A session with conf/spark-defaults.conf, then ``conf``, Delta Lake and the ``rmq`` data source registered.
    With ``jvm_log``, the JVM this call launches writes its console output there (appended) for its whole life; a JVM
    already running in this process keeps its own."""
    from delta import configure_spark_with_delta_pip

    from connector import register

    settings = read_spark_defaults()
    settings.update(conf or {})
    if master is not None:
        settings["spark.master"] = master
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    # configure_spark_with_delta_pip sets spark.jars.packages to the pip version's jars; point it at DELTA_JARS.
    builder = configure_spark_with_delta_pip(builder).config("spark.jars.packages", DELTA_JARS)
    if jvm_log is None:
        spark = builder.getOrCreate()
    else:
        with console_to(jvm_log):
            spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


@contextmanager
def console_to(path: Path) -> Iterator[None]:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at ``path`` while the block runs.

    Why descriptors and not a log4j setting: the spark-submit JVM that pyspark launches inherits them, and what it
    prints before any logging is configured (the launcher's notes, Ivy's ``:: resolving dependencies ::`` report)
    has no other switch. The JVM keeps the file after the block; this process gets its terminal back at once.
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(fd) for fd in (1, 2)]
    try:
        with path.open("ab") as log:
            for fd in (1, 2):
                os.dup2(log.fileno(), fd)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
