"""One way to build a SparkSession for jobs and tests: conf/spark-defaults.conf, Delta Lake, and the rmq source.

Delta's jars come through ``configure_spark_with_delta_pip``, which asks Maven Central for the jars of the pip
package's own version. delta-spark 4.4.1's jars for Spark 4.2 are not on Maven Central (4.4.0 is the newest there),
so the package coordinate is pinned to DELTA_JARS below; the 4.4.1 Python API runs on them unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
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
                  log_level: str = "WARN") -> SparkSession:
    """A session with conf/spark-defaults.conf, then ``conf``, Delta Lake and the ``rmq`` data source registered."""
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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark
