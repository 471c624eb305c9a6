"""The jobs' progress line (jobs/progress.py) against a fake status tracker and clock: the bar, the ETA's arithmetic,
the rendering, how it is written to a terminal (one line rewritten, cleared at the end) and to a log (plain lines),
and the ingest's per-batch line with its ETA in messages. No Spark: a few milliseconds."""

from __future__ import annotations

import io
import json
import re
import time
from types import SimpleNamespace

import pytest

from jobs.progress import StageProgress, StageSample, bar, duration, eta_seconds, render, sample


class FakeTracker:
    """Spark's StatusTracker as the progress line uses it: ``stages`` maps a stage id to (tasks, done, running,
    failed)."""

    def __init__(self) -> None:
        self.stages: dict[int, tuple[int, int, int, int]] = {}

    def getActiveStageIds(self) -> list[int]:  # noqa: N802 (Spark's name)
        return list(self.stages)

    def getStageInfo(self, sid: int) -> SimpleNamespace | None:  # noqa: N802
        if sid not in self.stages:
            return None
        tasks, done, running, failed = self.stages[sid]
        return SimpleNamespace(stageId=sid, numTasks=tasks, numCompletedTasks=done, numActiveTasks=running,
                               numFailedTasks=failed)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_fills_in_proportion_and_is_full_only_when_done() -> None:
    assert bar(0, 8) == "[" + "." * 20 + "]"
    assert bar(2, 8) == "[" + "#" * 5 + "." * 15 + "]"
    assert bar(7, 8) == "[" + "#" * 17 + "." * 3 + "]"  # 17.5 cells: rounded down
    assert bar(8, 8) == "[" + "#" * 20 + "]"
    assert bar(0, 0) == bar(0, 8) and bar(9, 8) == bar(8, 8)


@pytest.mark.parametrize(("done", "total", "elapsed", "eta"), [
    (0, 8, 10.0, None),  # no pace yet
    (2, 8, 6.0, 18.0),  # 3 s a task, 6 left
    (8, 8, 30.0, 0.0),
    (1, 3, 0.0, 0.0),
])
def test_eta_carries_the_pace_so_far_to_the_end(done: int, total: int, elapsed: float, eta: float | None) -> None:
    assert eta_seconds(done, total, elapsed) == eta


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration(s) for s in (0, 8.4, 59.6, 125, 3599, 3720)] == [
        "0 s", "8 s", "1 min 00 s", "2 min 05 s", "59 min 59 s", "1 h 02 min"]


def test_render() -> None:
    line = render("backfill", StageSample((4, 5), 4, 8, 2, 1), 12.2, 12.0)
    assert line == "backfill: stage 4,5 [##########..........] 4/8 tasks (2 running, 1 failed), 12 s, ETA 12 s"
    assert render("replay", StageSample((7,), 0, 4, 2), 3, None) == (
        "replay: stage 7 [....................] 0/4 tasks (2 running), 3 s")


def test_sample_sums_the_running_stages() -> None:
    tracker = FakeTracker()
    assert sample(tracker) is None
    tracker.stages = {5: (4, 1, 2, 0), 3: (2, 2, 0, 1)}
    assert sample(tracker) == StageSample((3, 5), 3, 6, 2, 1)


def test_eta_counts_from_when_the_running_stages_showed() -> None:
    tracker, clock = FakeTracker(), Clock()
    progress = StageProgress(tracker, "backfill", out=io.StringIO(), clock=clock)
    assert progress.line() is None
    tracker.stages = {4: (8, 0, 2, 0)}
    clock.now += 4  # Spark planned for 4 s: the stage shows now
    assert progress.line() == "backfill: stage 4 [....................] 0/8 tasks (2 running), 4 s"
    tracker.stages = {4: (8, 2, 2, 0)}
    clock.now += 6  # 2 tasks in 6 s: 6 left take 18 s
    assert progress.line().endswith("2/8 tasks (2 running), 10 s, ETA 18 s")
    tracker.stages = {6: (2, 0, 1, 0)}  # the next stage: a new pace
    clock.now += 1
    assert progress.line().endswith("0/2 tasks (1 running), 11 s")
    tracker.stages = {6: (2, 1, 1, 0)}
    clock.now += 5
    assert progress.line().endswith("1/2 tasks (1 running), 16 s, ETA 5 s")


def wait_for(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the progress thread did not write in time"
        time.sleep(0.005)


def test_on_a_terminal_one_line_is_rewritten_then_cleared() -> None:
    tracker, out, job_out = FakeTracker(), Terminal(), io.StringIO()
    tracker.stages = {4: (8, 1, 2, 0)}
    with StageProgress(tracker, "replay", interval_s=0.01, out=out, clock=Clock()) as progress:
        wait_for(lambda: "1/8 tasks" in out.getvalue())
        progress.note("replay: 100 rows", job_out)  # the job's own line: the progress line is cleared first
        cleared = out.getvalue()
        wait_for(lambda: len(out.getvalue()) > len(cleared))  # and drawn again, though nothing changed
        assert out.getvalue()[len(cleared):].startswith("\rreplay: stage 4 [##")
        tracker.stages = {4: (8, 3, 2, 0)}
        wait_for(lambda: "3/8 tasks" in out.getvalue())
    text = out.getvalue()
    assert "\n" not in text and text.startswith("\rreplay: stage 4 [##......")
    *_, drawn, blank, end = cleared.split("\r")
    assert "1/8 tasks" in drawn and blank == " " * len(drawn) and end == ""  # cleared for the job's line
    assert job_out.getvalue() == "replay: 100 rows\n"
    last = text.rstrip("\r ").rsplit("\r", 1)[1]
    assert "3/8 tasks" in last and text.endswith("\r" + " " * len(last) + "\r")  # cleared: the terminal as it was


def test_in_a_log_plain_lines_when_something_changed() -> None:
    tracker, out = FakeTracker(), io.StringIO()
    tracker.stages = {2: (4, 0, 2, 0)}
    with StageProgress(tracker, "ingest", interval_s=0.01, out=out, clock=Clock()):
        wait_for(lambda: out.getvalue().count("\n") >= 1)
        time.sleep(0.05)  # nothing changed (the fake clock stands still): nothing more is written
        tracker.stages = {2: (4, 4, 0, 0)}
        wait_for(lambda: out.getvalue().count("\n") >= 2)
    assert "\r" not in out.getvalue()
    assert out.getvalue().splitlines() == [
        "ingest: stage 2 [....................] 0/4 tasks (2 running), 0 s",
        "ingest: stage 2 [####################] 4/4 tasks (0 running), 0 s, ETA 0 s"]


def test_ingest_lines_carry_what_is_left_and_an_eta_in_messages() -> None:
    from jobs.ingest import _report

    def batch(batch_id: int, rows: int, end: int) -> dict:
        latest = {"T": {"a": {"0": 200}}, "$metrics": {}}  # the run's target, as the source reports it
        return {"batchId": batch_id, "numInputRows": rows, "processedRowsPerSecond": 25.0,
                "sources": [{"endOffset": json.dumps({"T": {"a": {"0": end}}}), "latestOffset": json.dumps(latest)}]}

    query, out, seen = SimpleNamespace(recentProgress=[batch(0, 50, 50)]), io.StringIO(), {}
    progress = StageProgress(FakeTracker(), "ingest", out=io.StringIO())
    _report(query, seen, progress, out, time.monotonic() - 10)  # 50 rows in 10 s, 150 left
    query.recentProgress.append(batch(1, 150, 200))
    _report(query, seen, progress, out, time.monotonic() - 40)
    _report(query, seen, progress, out, None)  # nothing new: nothing printed
    first, second = out.getvalue().splitlines()
    assert re.fullmatch(r"ingest: batch 0: 50 rows \(25 rows/s\), 150 behind, ETA 3\d s", first)  # 30 s and a stall
    assert second == "ingest: batch 1: 150 rows (25 rows/s), 0 behind"
