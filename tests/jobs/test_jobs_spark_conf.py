"""Whose Spark setting wins (jobs/spark.py): the caller's, then the launcher's (spark-submit, SPARK_CONF_DIR,
PYSPARK_SUBMIT_ARGS), then the shipped spark-defaults.conf, which must never force ``spark.master`` over a cluster's."""

from __future__ import annotations

from pathlib import Path

from jobs.spark import DELTA_JARS, default_conf, launcher_conf, read_spark_defaults, session_settings

DEFAULTS = {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}


def test_the_shipped_defaults_fill_only_what_nobody_set() -> None:
    assert session_settings({}, DEFAULTS, python="/venv/bin/python") == {
        **DEFAULTS, "spark.jars.packages": DELTA_JARS, "spark.pyspark.python": "/venv/bin/python"}
    launched = {"spark.master": "spark://head:7077", "spark.sql.shuffle.partitions": "200",
                "spark.jars.packages": "org.example:x:1"}
    assert session_settings(launched, DEFAULTS) == {"spark.ui.enabled": "false",
                                                    "spark.jars.packages": f"org.example:x:1,{DELTA_JARS}"}
    with_delta = {"spark.jars.packages": "io.delta:delta-spark_4.2_2.13:4.4.0"}
    assert "spark.jars.packages" not in session_settings(with_delta, DEFAULTS)
    # the caller (a job's --master and --conf) wins over the launcher and the defaults
    assert session_settings(launched, DEFAULTS, master="local[1]", conf={"spark.sql.shuffle.partitions": "8"},
                            python="/venv/bin/python") == {
        "spark.ui.enabled": "false", "spark.jars.packages": f"org.example:x:1,{DELTA_JARS}",
        "spark.sql.shuffle.partitions": "8", "spark.master": "local[1]", "spark.pyspark.python": "/venv/bin/python"}
    # a local master's workers run this interpreter unless someone chose theirs (PYSPARK_PYTHON lands in the launcher)
    chosen = {"spark.master": "local[2]", "spark.pyspark.python": "/usr/bin/python3.13"}
    assert "spark.pyspark.python" not in session_settings(chosen, DEFAULTS)


def test_the_launcher_is_spark_conf_dir_then_pyspark_submit_args(tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text("# a cluster's\nspark.master   yarn\nspark.executor.memory 4g\n")
    assert launcher_conf({"SPARK_CONF_DIR": str(tmp_path)}) == {"spark.master": "yarn",
                                                                "spark.executor.memory": "4g"}
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "spark-defaults.conf").write_text("spark.master k8s://api:6443\n")
    assert launcher_conf({"SPARK_HOME": str(home)}) == {"spark.master": "k8s://api:6443"}
    assert launcher_conf({"PYSPARK_PYTHON": "/opt/py"}) == {"spark.pyspark.python": "/opt/py"}
    args = "--master local-cluster[2,1,1024] --conf spark.executor.cores=2 pyspark-shell"
    assert launcher_conf({"SPARK_CONF_DIR": str(tmp_path), "PYSPARK_SUBMIT_ARGS": args}) == {
        "spark.master": "local-cluster[2,1,1024]", "spark.executor.memory": "4g", "spark.executor.cores": "2"}
    assert launcher_conf({"SPARK_CONF_DIR": str(tmp_path / "missing")}) == {}


def test_the_defaults_are_the_checkouts_conf_files() -> None:
    assert default_conf("spark-defaults.conf") == Path(__file__).resolve().parents[2] / "conf" / "spark-defaults.conf"
    assert read_spark_defaults()["spark.master"] == "local[2]"
