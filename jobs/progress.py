"""Progress of a running batch job, from Spark's status tracker, polled in a daemon thread.

Printed plainly, without rich or tqdm: the whole display is one line (tasks done of the running stages, elapsed
time), rewritten in place on a terminal and printed only when it changes (at most every ``interval_s``) in a log,
so a dependency would buy colours and nothing else.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class StageProgress:
    """``with StageProgress(spark, "backfill"):`` prints ``backfill: stage 4 3/8 tasks (2 running), 12 s`` while
    Spark works, and nothing when it does not."""

    def __init__(self, spark: SparkSession, label: str, *, interval_s: float = 2.0, out: TextIO | None = None):
        self._tracker = spark.sparkContext.statusTracker()
        self._label = label
        self._out = out or sys.stderr
        self._tty = self._out.isatty()
        self._interval_s = interval_s if not self._tty else min(interval_s, 0.5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{label}-progress", daemon=True)
        self._started = time.monotonic()
        self._last = ""

    def __enter__(self) -> StageProgress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        if self._tty and self._last:
            self._out.write("\r" + " " * len(self._last) + "\r")
            self._out.flush()

    def line(self) -> str | None:
        """The current progress line, or None when no stage runs."""
        stages = [info for sid in self._tracker.getActiveStageIds()
                  if (info := self._tracker.getStageInfo(sid)) is not None]
        if not stages:
            return None
        done = sum(s.numCompletedTasks for s in stages)
        total = sum(s.numTasks for s in stages)
        running = sum(s.numActiveTasks for s in stages)
        ids = ",".join(str(s.stageId) for s in sorted(stages, key=lambda s: s.stageId))
        failed = sum(s.numFailedTasks for s in stages)
        failures = f", {failed} failed" if failed else ""
        return (f"{self._label}: stage {ids} {done}/{total} tasks ({running} running{failures}), "
                f"{time.monotonic() - self._started:.0f} s")

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                line = self.line()
            except Exception:  # the JVM is going away under us (session stopping): stop reporting
                return
            if line is None or line == self._last:
                continue
            if self._tty:
                self._out.write("\r" + line.ljust(len(self._last)))
            else:
                self._out.write(line + "\n")
            self._out.flush()
            self._last = line
