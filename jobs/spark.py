"""One way to build a SparkSession for jobs and tests: the shipped spark-defaults.conf, Delta Lake, and the rmq source.

Whose setting wins, highest first: the caller's (``master=``, ``conf=``: a job's --master and --conf), then what
Spark's launcher set (spark-submit's --master, --conf and properties file, SPARK_CONF_DIR's spark-defaults.conf,
PYSPARK_SUBMIT_ARGS), then ours (conf/spark-defaults.conf, shipped in the package as ``rmq_conf``). Ours only fill
gaps: a builder setting overrides the launcher's, so ours must not be set where the launcher set something. That
matters most for ``spark.master``: ours is ``local[2]``, and a job spark-submitted to a cluster must run there.

Delta's jars come through ``spark.jars.packages``, which only a JVM that Python starts itself resolves; under
spark-submit they come from its ``--packages``. delta-spark 4.4.1's jars for Spark 4.2 are not on Maven Central
(4.4.0 is the newest there), so the coordinate is DELTA_JARS, not the pip package's version (what
``configure_spark_with_delta_pip`` would ask for); the 4.4.1 Python API runs on them unchanged.

The JVM's own console output (the launcher's notes, Ivy's resolution report of those jars, log4j's console
appender, and what the Python workers it forks print) can go to a file instead of the terminal: ``jvm_log``.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

# The checkout this module runs from (tests run the jobs from it); in an installed wheel, site-packages.
REPO = Path(__file__).resolve().parents[1]
DELTA_JARS = "io.delta:delta-spark_4.2_2.13:4.4.0"
CONF_PACKAGE = "rmq_conf"  # conf/, as setup.py ships it


def default_conf(name: str) -> Path:
    """conf/<name> of the checkout, else the installed package's copy (an editable install maps both to one file)."""
    checkout = REPO / "conf" / name
    if checkout.is_file():
        return checkout
    # The package's directories, not importlib.resources: rmq_conf is a namespace package, and where a second copy
    # is visible (a venv with the system's site-packages holding an editable install) resources.files fails on
    # the editable install's path hook; the first real directory that has the file is the one that shipped.
    spec = importlib.util.find_spec(CONF_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(location) / name
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{name}: neither {checkout} nor the installed package {CONF_PACKAGE} has it")


def read_spark_defaults(path: Path | None = None) -> dict[str, str]:
    """``key value`` lines (spark-defaults.conf syntax); blank lines and ``#`` comments skipped."""
    conf: dict[str, str] = {}
    for line in (path or default_conf("spark-defaults.conf")).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        conf[key] = value.strip()
    return conf


def launcher_conf(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The settings Spark's launcher made before ours. Under spark-submit (which started this Python and its JVM,
    and says so in PYSPARK_GATEWAY_PORT) that JVM's conf: its --master, --conf, properties file, and Spark's own
    defaults. Otherwise what the JVM that pyspark starts will read: SPARK_CONF_DIR's (else SPARK_HOME/conf's)
    spark-defaults.conf, then the --master and --conf of PYSPARK_SUBMIT_ARGS."""
    if environ.get("PYSPARK_GATEWAY_PORT"):
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # connects to spark-submit's JVM; a JVM-backed SparkConf reads its conf
        return dict(SparkConf().getAll())
    conf_dir = environ.get("SPARK_CONF_DIR") or (f"{environ['SPARK_HOME']}/conf" if environ.get("SPARK_HOME") else "")
    defaults = Path(conf_dir, "spark-defaults.conf") if conf_dir else None
    conf = read_spark_defaults(defaults) if defaults is not None and defaults.is_file() else {}
    if environ.get("PYSPARK_PYTHON"):
        conf["spark.pyspark.python"] = environ["PYSPARK_PYTHON"]
    args = shlex.split(environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--master":
            conf["spark.master"] = value
        elif flag == "--conf" and "=" in value:
            key, _, setting = value.partition("=")
            conf[key] = setting
    return conf


def session_settings(launcher: Mapping[str, str], defaults: Mapping[str, str], *, master: str | None = None,
                     conf: Mapping[str, str] | None = None, python: str = sys.executable) -> dict[str, str]:
    """The builder's settings: ``defaults`` where ``launcher`` has nothing, then ``conf``, then ``master``; Delta's
    jars added to the launcher's packages unless they are there. On a local master whose workers' Python nobody
    chose, the workers run ``python`` (this interpreter): Spark's default is ``python3`` on the PATH, which in an
    unactivated virtual environment, or beside a second Python, is another version, and PySpark refuses that."""
    settings = {key: value for key, value in defaults.items() if key not in launcher}
    packages = launcher.get("spark.jars.packages", "")
    if "io.delta:delta-spark" not in packages:
        settings["spark.jars.packages"] = ",".join(filter(None, [packages, DELTA_JARS]))
    settings.update(conf or {})
    if master is not None:
        settings["spark.master"] = master
    local = settings.get("spark.master", launcher.get("spark.master", "")).startswith("local")
    if local and "spark.pyspark.python" not in {**launcher, **settings}:
        settings["spark.pyspark.python"] = python
    return settings


def build_session(app_name: str, *, master: str | None = None, conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN", jvm_log: Path | None = None) -> SparkSession:
    """A session with Delta Lake and the ``rmq`` data source registered; settings as the module docstring says.
    With ``jvm_log``, the JVM this call launches writes its console output there (appended) for its whole life; a JVM
    already running in this process keeps its own."""
    from connector import register

    builder = SparkSession.builder.appName(app_name)
    settings = session_settings(launcher_conf(), read_spark_defaults(), master=master, conf=conf)
    if "spark.pyspark.python" in settings:  # a driver in Python reads it from here only (spark-submit sets it so)
        os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    for key, value in settings.items():
        builder = builder.config(key, value)
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
