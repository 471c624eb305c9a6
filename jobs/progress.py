"""Progress of a running job, from Spark's status tracker, polled in a daemon thread: a bar, tasks done, elapsed
time and an ETA.

What is measured: the tasks of the stages running now (Spark's public status tracker knows tasks, not rows). The
ETA is the pace of those stages so far carried to their end, ``elapsed * (total - done) / done``, counted from when
that set of stages first showed; a job with several stages gets an ETA per stage, not for the whole job. The
jobs' own figures (rows, messages) are in the lines they print when a step ends.

Printed plainly, without rich or tqdm: one line, rewritten in place on a terminal (``\\r``) and cleared at the end;
in a log (not a terminal) a plain line when it changes, at most every ``interval_s``. A dependency would buy
colours and nothing else.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

BAR_WIDTH = 20


@dataclass(frozen=True, slots=True)
class StageSample:
    """The running stages at one poll: their ids, tasks done, running and failed, of ``total``."""

    stages: tuple[int, ...]
    done: int
    total: int
    running: int
    failed: int = 0


def sample(tracker: Any) -> StageSample | None:
    """The running stages of a StatusTracker (``spark.sparkContext.statusTracker()``); None when none runs."""
    infos = [info for sid in tracker.getActiveStageIds() if (info := tracker.getStageInfo(sid)) is not None]
    if not infos:
        return None
    return StageSample(tuple(sorted(s.stageId for s in infos)), sum(s.numCompletedTasks for s in infos),
                       sum(s.numTasks for s in infos), sum(s.numActiveTasks for s in infos),
                       sum(s.numFailedTasks for s in infos))


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[#####...............]``: the share done, in ``width`` cells (rounded down, so full only when done)."""
    filled = min(width, max(0, done * width // total)) if total > 0 else 0
    return "[" + "#" * filled + "." * (width - filled) + "]"


def eta_seconds(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the pace so far; None before anything is done (no pace yet)."""
    if done <= 0 or total <= 0 or elapsed_s < 0:
        return None
    return elapsed_s * max(total - done, 0) / done


def duration(seconds: float) -> str:
    """``8 s``, ``2 min 05 s``, ``1 h 02 min``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def render(label: str, now: StageSample, elapsed_s: float, eta_s: float | None) -> str:
    """``backfill: stage 4 [##########..........] 4/8 tasks (2 running), 12 s, ETA 12 s``."""
    ids = ",".join(map(str, now.stages))
    failures = f", {now.failed} failed" if now.failed else ""
    eta = f", ETA {duration(eta_s)}" if eta_s is not None else ""
    return (f"{label}: stage {ids} {bar(now.done, now.total)} {now.done}/{now.total} tasks ({now.running} running"
            f"{failures}), {duration(elapsed_s)}{eta}")


class StageProgress:
    """``with StageProgress(tracker, "backfill"):`` prints the progress line while Spark works, and nothing when it
    does not. ``note(text, out)`` prints a line of the job's own without tearing the progress line."""

    def __init__(self, tracker: Any, label: str, *, interval_s: float = 2.0, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._tracker = tracker
        self._label = label
        self._out = out or sys.stderr
        self._tty = self._out.isatty()
        self._interval_s = interval_s if not self._tty else min(interval_s, 0.5)
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"{label}-progress", daemon=True)
        self._started = clock()
        self._stages: tuple[int, ...] = ()
        self._stages_since = self._started
        self._shown = ""  # what the terminal's line holds now
        self._last = ""  # the last line written

    def __enter__(self) -> StageProgress:
        self._started = self._stages_since = self._clock()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._clear()

    def line(self) -> str | None:
        """The current progress line, or None when no stage runs."""
        now = sample(self._tracker)
        if now is None:
            return None
        at = self._clock()
        if now.stages != self._stages:
            self._stages, self._stages_since = now.stages, at
        return render(self._label, now, at - self._started, eta_seconds(now.done, now.total, at - self._stages_since))

    def note(self, text: str, out: TextIO) -> None:
        """Print ``text`` (a line of the job's own) to ``out``; on a terminal the progress line is cleared first and
        drawn again at the next poll."""
        with self._lock:
            self._clear()
            print(text, file=out, flush=True)

    def _clear(self) -> None:
        if self._tty and self._shown:
            self._out.write("\r" + " " * len(self._shown) + "\r")
            self._out.flush()
            self._shown = self._last = ""  # the next poll draws it again

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                line = self.line()
            except Exception:  # the JVM is going away under us (session stopping): stop reporting
                return
            with self._lock:
                if line is None or line == self._last:
                    continue
                if self._tty:
                    self._out.write("\r" + line.ljust(len(self._shown)))
                    self._shown = line
                else:
                    self._out.write(line + "\n")
                self._out.flush()
                self._last = line
