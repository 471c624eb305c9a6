"""The jobs as commands: --help, bad arguments and an unreachable NameServer or missing topic fail fast (before
Spark starts) with one clear line and exit status 2; argument parsing and range bounds in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from broker.common.errors import JobError
from jobs.common import (
    Bound,
    JobsConf,
    connector_error,
    key_value_pairs,
    parse_bound,
    range_options,
    subscription_options,
)
from jobs.ingest import IngestJob
from jobs.replay import ReplayJob
from jobs.spark import REPO

JOBS = ("backfill", "ingest", "replay", "main")
UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1: connection refused at once


def run_job(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"jobs.{name}", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("name", JOBS)
def test_help(name: str) -> None:
    done = run_job(name, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m jobs.{name}")
    assert "--namesrv" in done.stdout


@pytest.mark.parametrize(("name", "args", "message"), [
    ("backfill", ["--table", "t"], "give the topics to read"),
    ("backfill", ["--table", "t", "--topic", "T", "--topic-pattern", "T.*"], "not both"),
    ("backfill", ["--topic", "T"], "the following arguments are required: --table"),
    ("backfill", ["--table", "t", "--topic", "T", "--from", "yesterday"], "--from 'yesterday' is none of"),
    ("backfill", ["--table", "t", "--topic", "T", "--from", "2024-05-02", "--to", "2024-05-01"], "is not before"),
    ("backfill", ["--table", "t", "--topic", "T", "--from", '{"T": {"broker-a": {"0": "x"}}}'], "offsets must look"),
    ("backfill", ["--table", "t", "--topic", "T", "--conf", "novalue"], "argument --conf: expects KEY=VALUE"),
    ("ingest", ["--table", "t", "--topic", "T"], "the following arguments are required: --checkpoint"),
    ("ingest", ["--table", "t", "--topic", "T", "--checkpoint", "c", "--trigger", "once"],
     "--trigger must be one of available-now, processing-time, got 'once'"),
    ("ingest", ["--table", "t", "--topic", "T", "--checkpoint", "c", "--max-offsets-per-trigger", "0"], ">= 1"),
    ("replay", ["--table", "t", "--topic", "T", "--version", "1", "--from-version", "0"], "choose one selection"),
    ("replay", ["--table", "t", "--topic", "T", "--to-version", "3"], "--to-version needs --from-version"),
    ("replay", ["--table", "t", "--topic", "T", "--sink-option", "topic=X"], "use --namesrv, --topic"),
    ("main", ["--orders", "1"], "--orders must be >= 2"),
])
def test_bad_arguments(name: str, args: list[str], message: str) -> None:
    done = run_job(name, *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["backfill", "ingest", "replay"])
def test_unreachable_namesrv(name: str, tmp_path) -> None:
    args = {"backfill": ["--table", str(tmp_path / "t"), "--topic", "T"],
            "ingest": ["--table", str(tmp_path / "t"), "--topic", "T", "--checkpoint", str(tmp_path / "c")],
            "replay": ["--table", str(tmp_path / "t"), "--topic", "T"]}[name]
    done = run_job(name, "--namesrv", UNREACHABLE, *args)
    assert done.returncode == 2
    assert f"no NameServer answers at {UNREACHABLE}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "t").exists()  # nothing started


def test_trigger_continuous_is_processing_time(tmp_path, capsys) -> None:
    """The old name keeps working (scripts, jobs.conf files), with one line on stderr naming the new one."""
    done = run_job("ingest", "--namesrv", UNREACHABLE, "--table", str(tmp_path / "t"), "--topic", "T",
                   "--checkpoint", str(tmp_path / "c"), "--trigger", "continuous")
    first, *rest = done.stderr.splitlines()
    assert first == ("python -m jobs.ingest: --trigger continuous is deprecated, use --trigger processing-time "
                     "(micro-batches every --interval; Spark's continuous trigger is something else)")
    assert done.returncode == 2 and f"no NameServer answers at {UNREACHABLE}" in rest[0]  # it went on as asked
    job = IngestJob("n", "t", "c", topics=("T",), trigger="continuous")
    assert job.trigger == "processing-time"
    assert "use --trigger processing-time" in capsys.readouterr().err
    assert IngestJob("n", "t", "c", topics=("T",), trigger="processing-time").trigger == "processing-time"
    with pytest.raises(JobError, match="--trigger must be one of available-now, processing-time, got 'once'"):
        IngestJob("n", "t", "c", topics=("T",), trigger="once")


def test_missing_topic(namesrv: str, tmp_path) -> None:
    done = run_job("backfill", "--namesrv", namesrv, "--topic", "NoSuchTopic", "--table", str(tmp_path / "t"))
    assert done.returncode == 2
    assert "topic NoSuchTopic does not exist" in done.stderr
    assert f"mqadmin updateTopic -n {namesrv}" in done.stderr


def test_parse_bound() -> None:
    assert parse_bound("earliest", "--from") == Bound("earliest")
    assert parse_bound("1714550400000", "--from") == Bound("timestamp", timestamp_ms=1714550400000)
    assert parse_bound("2024-05-01", "--from").timestamp_ms == 1714521600000  # naive means UTC
    assert parse_bound("2024-05-01T10:00:00+02:00", "--from").timestamp_ms == \
        int(datetime(2024, 5, 1, 8, tzinfo=UTC).timestamp() * 1000)
    assert parse_bound("-2h", "--from", now_ms=10_000_000).timestamp_ms == 10_000_000 - 7_200_000
    offsets = parse_bound('{"T": {"broker-a": {"0": 5, "1": -2}}}', "--from")
    assert offsets.kind == "offsets" and json.loads(offsets.offsets_json) == {"T": {"broker-a": {"0": 5, "1": -2}}}
    with pytest.raises(JobError, match="not valid JSON"):
        parse_bound("{nope", "--to")


def test_range_options() -> None:
    assert range_options(Bound("earliest"), Bound("latest")) == {"startingOffsets": "earliest",
                                                                 "endingOffsets": "latest"}
    assert range_options(Bound("timestamp", 5), Bound("timestamp", 9)) == {"startingTimestamp": "5",
                                                                           "endingTimestamp": "9"}
    with pytest.raises(JobError, match="--from latest reads nothing"):
        range_options(Bound("latest"), Bound("latest"))
    with pytest.raises(JobError, match="--to earliest reads nothing"):
        range_options(Bound("earliest"), Bound("earliest"))


def test_subscription_and_pairs() -> None:
    assert subscription_options(("A",), None) == {"topic": "A"}
    assert subscription_options(("A", "B"), None) == {"topics": "A,B"}
    assert subscription_options((), "A.*") == {"topicPattern": "A.*"}
    with pytest.raises(JobError, match="not a regular expression"):
        subscription_options((), "(")
    assert key_value_pairs(["a=1", "b = x=y"]) == {"a": "1", "b": "x=y"}


def test_jobs_conf() -> None:
    conf = JobsConf.from_properties({"namesrvAddr": "10.0.0.1:9876", "ingest.maxOffsetsPerTrigger": "500"})
    assert conf.namesrv_addr == "10.0.0.1:9876" and conf.max_offsets_per_trigger == 500
    with pytest.raises(JobError, match="unknown key"):
        JobsConf.from_properties({"namesrvAdr": "x"})
    with pytest.raises(JobError, match="must be a number"):
        JobsConf.from_properties({"namesrvTimeoutMs": "soon"})
    shipped = JobsConf.load(REPO / "conf" / "jobs.conf")
    assert shipped.namesrv_addr == "127.0.0.1:9876" and shipped.max_offsets_per_trigger is None


def test_access_keys_from_jobs_conf_or_flags_reach_the_connector_options() -> None:
    from jobs import backfill

    conf = JobsConf.from_properties({"accessKey": "alice", "secretKey": "conf-secret"})
    assert "conf-secret" not in repr(conf)
    job, _ = backfill.parse_args(["--topic", "T", "--table", "t"], conf)
    assert {k: job.source_options()[k] for k in ("accessKey", "secretKey")} == {"accessKey": "alice",
                                                                                "secretKey": "conf-secret"}
    assert "conf-secret" not in repr(job)
    job, _ = backfill.parse_args(["--topic", "T", "--table", "t", "--secret-key", "flag-secret"], conf)
    assert job.source_options()["secretKey"] == "flag-secret"  # a flag wins over jobs.conf
    assert "accessKey" not in backfill.parse_args(["--topic", "T", "--table", "t"], JobsConf())[0].source_options()
    with pytest.raises(SystemExit):  # one without the other: an argparse error, exit status 2
        backfill.parse_args(["--topic", "T", "--table", "t", "--access-key", "alice"], JobsConf())


def test_replay_job_checks() -> None:
    assert ReplayJob("n", "t", "T", from_version=2).effective_sink_id() == "replay-T"
    assert ReplayJob("n", "t", "%RETRY%g|x").effective_sink_id() == "replay-_RETRY_g_x"
    with pytest.raises(JobError, match="is before"):
        ReplayJob("n", "t", "T", from_version=3, to_version=2)


def test_connector_error_is_found_in_spark_text() -> None:
    text = ("pyspark.errors.exceptions.captured.AnalysisException: [PYTHON_DATA_SOURCE_ERROR] ...\n"
            "broker.common.errors.ConnectorOptionError: unknown batch source option(s) startingoffset; "
            "known options: ...")
    assert connector_error(RuntimeError(text)) == ("ConnectorOptionError: unknown batch source option(s) "
                                                   "startingoffset; known options: ...")
    assert connector_error(RuntimeError("something else")) is None
