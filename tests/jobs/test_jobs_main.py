"""The README's main command, as a user runs it: a subprocess that starts its own NameServer and broker, ingests,
backfills, replays the table through the exactly-once sink and reads it back, prints short lines per step (Spark's
and Ivy's console output goes to demo.log instead), and stops what it started."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from broker.tools.local_cluster import port_accepts
from connector.resolver import resolver_pid
from jobs.spark import REPO

pytestmark = pytest.mark.smoke

# Every line the demo prints, and nothing else may reach the terminal: not the JVM's (the launcher, Ivy's resolution
# and downloads, log4j), nor py4j's, nor Python warnings. Those go to demo.log.
DEMO_LINES = [re.compile(p) for p in (
    r"",
    r"== \[ *[\d.]+ s\] \S.*",  # a step
    r"NameServer 127\.0\.0\.1:\d+, broker 127\.0\.0\.1:\d+, ready in [\d.]+ s",
    r"\d+ orders sent to DemoOrders \(4 queues\), [\d.]+ s, (\d+ rows/s|-)",
    r"Spark 4\.\d+\.\d+ local\[2\], ready in [\d.]+ s \(its console output goes to \S+/demo\.log\)",
    r"ingest: batch \d+: \d+ rows \(\d+ rows/s\)(, \d+ behind)?(, ETA [\w ]+)?",
    r"\d+ rows in \d+ micro-batch\(es\), table version \d+, [\d.]+ s",
    r"read \d+ rows, inserted \d+ new \(\d+ already there\), table version \d+, [\d.]+ s",
    r"\d+ rows, \d+ distinct messages \(topic, brokerName, queueId, queueOffset\); created \d+, paid \d+, shipped \d+",
    r"queue +offset +keys +tags +body +storeTimestamp", r"-+( +-+){5}",
    r"\d+ +\d+ +order-\d+ +(created|paid|shipped) +\{\"order\": \d+, \"amount\": \d+\} +\d{4}-\d\d-\d\d [\d:.]+",
    r"history: version 0 CREATE TABLE 0 rows(; version \d+ WRITE \d+ rows)+",
    r"\d+ messages sent as half messages and committed \(latest version\), [\d.]+ s, (\d+ rows/s|-)",
    r"read back \d+ messages in [\d.]+ s, counted per key against the table's \d+ rows:",
    r"\d+ of \d+ keys match, \d+ rows missing, \d+ duplicates",
    r"=> every row of the table arrived exactly once",
    r"  pyspark --packages \S+ \\", r"    --conf \S+ \\", r"    --conf \S+", r"  >>> spark\..*",
    r"  python -m jobs\.\w+ .*# .*",
    r"logs: \S+/demo\.log  \(Spark, Ivy and log4j: the JVM's console\)",
    r"      \S+/cluster  \(NameServer, broker\)", r"      \S+/console  \(mqconsole\)",
    r"      \S+/resolvers  \(the sink's resolver\)",
    r"console http://127\.0\.0\.1:\d+/ \(mqconsole: cluster, topics, groups, messages, charts\)",
    r"console: http://127\.0\.0\.1:\d+/  \(stops with the demo: --keep-running keeps it up\)",
    # progress lines (jobs/progress.py): plain lines, as the output is not a terminal here
    r"(ingest|backfill|replay): stage [\d,]+ \[[#.]{20}\] \d+/\d+ tasks \(\d+ running(, \d+ failed)?\), [\w ]+"
    r"(, ETA [\w ]+)?",
)]


def foreign_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not any(p.fullmatch(line) for p in DEMO_LINES)]


def test_main_command_runs_to_completion(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "jobs.main", "--orders", "60", "--workdir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    out = done.stdout
    assert "60 rows, 60 distinct messages" in out
    assert "created 20, paid 20, shipped 20" in out
    assert "read 60 rows, inserted 0 new (60 already there)" in out  # the backfill found everything ingested
    assert (tmp_path / "delta" / "orders" / "_delta_log").is_dir()

    # The headline: the table replayed through the exactly-once sink, read back, each key once.
    assert re.search(r"^60 messages sent as half messages and committed", out, re.M)
    assert re.search(r"^read back 60 messages in [\d.]+ s, counted per key against the table's 60 rows:\n"
                     r"60 of 60 keys match, 0 rows missing, 0 duplicates\n"
                     r"=> every row of the table arrived exactly once$", out, re.M)

    # The terminal shows the demo's lines only; the JVM's went to the log file named at the end.
    log = tmp_path / "demo.log"
    assert f"logs: {log}  (Spark, Ivy and log4j" in out
    assert foreign_lines(out) == [] and foreign_lines(done.stderr) == []
    logged = log.read_text()
    assert ":: resolving dependencies ::" in logged and re.search(r" WARN ", logged)

    ports = [int(p) for p in re.findall(r"NameServer 127\.0\.0\.1:(\d+), broker 127\.0\.0\.1:(\d+)", out)[0]]
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("console: http://127.0.0.1:"), last  # ends with the web console's address
    ports.append(int(re.search(r":(\d+)/", last)[1]))
    namesrv = re.search(r"^NameServer (\S+),", out, re.M)[1]
    assert f"mqconsole on {last.split()[1]} for the NameServer {namesrv}" in \
        (tmp_path / "console" / "console.console.log").read_text()
    assert not any(port_accepts(port) for port in ports)  # stopped what it started
    assert resolver_pid(tmp_path / "resolvers", "replay-DemoOrdersReplay") is None  # the sink's resolver too
