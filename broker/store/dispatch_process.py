"""Dispatch in a child process (dispatchMode=PROCESS): the broker keeps its GIL for appends and requests.

Rule 1: the conversation between the broker process and its dispatch process is defined here and nowhere else: its
messages and the broker's side of it. The child's side (DispatchChild and the child's ``main``) is
``broker/store/dispatch_child.py``, which imports the messages from here.

ConsumeQueue and IndexFile are derived from the CommitLog, so the child runs the same ReputMessageService,
BuildConsumeQueue and BuildIndex as a dispatch thread would, on its own maps of the same files: the CommitLog mapped
read-only, the ConsumeQueue and IndexFile files read-write. The broker process keeps maps of those files for its
readers (pull, offsets, query by key) and only follows what the child reports::

    broker process                                            dispatch process
    put -> CommitLog end, in a shared 8-byte cell  ------->  follows the CommitLog up to the end, dispatches a step
    reader thread: ConsumeQueue/IndexFile views,  <-------  Step: reput offset, store time, touched queues' states,
      reput offset, arrival listeners                        index file names, tagsCodes per queue (long polling)
    retention, topic deletion, stop               ------->  DeleteExpired / DeleteTopics / Stop, each answered by
                                                  <-------  Done once its effects were reported

- Start: recovery and the re-dispatch it asks for run in the broker process (``MessageStore.start``); the child then
  starts from the recovered state (``ChildStart``). The tagsCode hook is sent pickled, so it must be importable.
- The flush of ConsumeQueue and IndexFile, and the checkpoint, stay in the broker process: ``msync`` of a shared file
  map writes back pages dirtied through any process's map, and the checkpoint needs only the reported store time.
- The child dies with the broker (``PR_SET_PDEATHSIG``, SIGKILL) and ignores SIGINT and SIGTERM, which a terminal's
  Ctrl-C or systemd's stop sends to the broker's whole process group: the broker stops it. If it dies alone, the
  reader thread says so at ERROR level and starts another from the last reported state (none once shutdown began).
  The index file it was writing may hold entries its header does not count yet, so the index is reloaded as after a
  crash and rebuilt from where that drops it.
- Memory ordering: the record bytes are copied into the map before the cell is stored, and x86-64 keeps stores in
  order; the child reads the cell before the bytes.
- An idle child sleeps: after SLEEP_AFTER_S without a put it sets the shared page's second cell (SLEEPING_CELL) and
  waits on its pipes instead of passing every 1 ms (an idle broker's dispatch cost 3 to 4 % of a core, and a test
  session keeps many brokers idle); the broker's next put sees the cell, clears it and writes a byte to the wake pipe.
  Each side puts an atomic operation (a lock's acquire and release) between its store of one cell and its load of the
  other, so they cannot both miss each other; a sleep still ends after SLEEP_POLL_MS.
- Reports travel as bytes (``encode_report``/``decode_report``): a Step as a marshalled tuple, which costs both sides
  about a tenth of pickling the dataclass (up to a thousand Steps a second under a trickle of puts); the rare Done
  pickled. Commands to the child are pickled (``Connection.send``).
"""

from __future__ import annotations

import ctypes
import logging
import marshal
import mmap
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import broker
from broker.common.errors import StoreError
from broker.common.logs import LogLayout, LogSettings, current_logging
from broker.store.config import DispatchMode, MessageStoreConfig
from broker.store.consume_queue import ConsumeQueueStore, QueueState
from broker.store.dispatch import (
    ArrivalListener,
    Arrivals,
    ReputMessageService,
    TagsCodeHook,
)
from broker.store.index_service import IndexService
from broker.store.mapped_file import MappedFileQueue
from broker.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

END_CELL = 0  # offsets in the shared page: the CommitLog end the broker published
SLEEPING_CELL = 8  # non-zero while the child sleeps: the next put writes to the wake pipe
SLEEP_AFTER_S = 0.05  # the child sleeps after this long without a put
SLEEP_POLL_MS = 100  # and wakes on its own after this long anyway
CALL_TIMEOUT_S = 60.0  # a command the child does not answer in this time is logged and given up
RESTART_PAUSE_S = 1.0  # between a dead child and the next one
# Not ``-m`` this module: then its classes would be pickled as __main__'s, which the broker cannot load.
_CHILD_MAIN = "import sys; from broker.store.dispatch_child import main; sys.exit(main(sys.argv[1:]))"


def unsupported_reason() -> str | None:
    """Why this platform cannot run the dispatch process, or None when it can. It needs ``os.memfd_create`` (Linux)
    for the shared CommitLog-end cell and ``prctl(PR_SET_PDEATHSIG)`` so the child dies with the broker; macOS has
    neither (and Apple's ARM cores do not keep stores in order, which the cell relies on)."""
    if not hasattr(os, "memfd_create"):
        return "os.memfd_create is not available on this platform"
    if not sys.platform.startswith("linux"):
        return f"PR_SET_PDEATHSIG is Linux only (this is {sys.platform})"
    return None


def effective_dispatch_mode(config: MessageStoreConfig) -> DispatchMode:
    """``config.dispatch_mode``, except PROCESS where the platform cannot run it: THREAD then, with one WARNING line
    (the broker works the same, dispatch shares the broker's GIL)."""
    if config.dispatch_mode is DispatchMode.PROCESS and (reason := unsupported_reason()) is not None:
        log.warning("dispatchMode=PROCESS is not supported here (%s): dispatching in a thread (dispatchMode=THREAD)",
                    reason)
        return DispatchMode.THREAD
    return config.dispatch_mode


# -- the messages -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ChildStart:
    """The first message to a child: where dispatch stands after recovery (or after the previous child)."""

    config: MessageStoreConfig
    tags_code_of: TagsCodeHook
    reput_from_offset: int
    last_store_timestamp: int
    queues: dict[tuple[str, int], QueueState]
    indexed_through: int
    log_level: int
    log_files: tuple[LogSettings, LogLayout] | None  # the broker's (broker/common/logs.py), None: stderr only


@dataclass(slots=True)
class Step:
    """What one dispatch step (or command) changed, once its units and index entries are written."""

    reput_from_offset: int
    last_store_timestamp: int
    queues: dict[tuple[str, int], QueueState]
    arrivals: Arrivals
    index_files: list[str] | None  # None: the same as in the previous Step
    indexed_through: int


@dataclass(slots=True)
class DeleteExpired:
    min_commit_log_offset: int


@dataclass(slots=True)
class DeleteTopics:
    topics: set[str]


@dataclass(slots=True)
class Stop:
    commit_log_end: int  # dispatch up to here, then exit


@dataclass(slots=True)
class Done:
    """The answer to a command, after the Step that carries its effects."""

    command: DeleteExpired | DeleteTopics | Stop


_STEP_TAG = b"S"  # a report's first byte: a marshalled Step
_PICKLE_TAG = b"P"  # or a pickled Done


def encode_report(report: Step | Done) -> bytes:
    """The bytes of a report to the broker: a Step as plain tuples, dicts and lists (``marshal``), a Done pickled."""
    if isinstance(report, Done):
        return _PICKLE_TAG + pickle.dumps(report, pickle.HIGHEST_PROTOCOL)
    queues = {key: tuple(state) for key, state in report.queues.items()}
    return _STEP_TAG + marshal.dumps((report.reput_from_offset, report.last_store_timestamp, queues, report.arrivals,
                                      report.index_files, report.indexed_through))


def decode_report(data: bytes) -> Step | Done:
    """``encode_report``'s inverse. Both processes run the same interpreter, so marshal's format agrees."""
    tag, payload = data[:1], memoryview(data)[1:]
    if tag == _STEP_TAG:
        reput_from_offset, last_store_timestamp, queues, arrivals, index_files, indexed_through = marshal.loads(payload)
        return Step(reput_from_offset, last_store_timestamp,
                    {key: QueueState(*state) for key, state in queues.items()}, arrivals, index_files,
                    indexed_through)
    if tag == _PICKLE_TAG:
        return pickle.loads(payload)
    raise ValueError(f"a dispatch report starts with {bytes(tag)!r}, neither {_STEP_TAG!r} nor {_PICKLE_TAG!r}")


# -- the broker side ------------------------------------------------------------------------------------------------


class DispatchProcess(ServiceThread):
    """The dispatch service of the broker process when dispatch runs in a child (the same interface as
    ReputMessageService run in a thread: ``reput_from_offset``, ``behind``, ``wakeup``, ``arrival_listeners``...).

    A reader thread owns the child: it starts it (so that PR_SET_PDEATHSIG, which follows the creating thread, lasts
    as long as the store), applies its reports to the broker's ConsumeQueue and IndexFile views, and starts another
    child when one dies."""

    name = "DispatchProcessReader"

    def __init__(self, config: MessageStoreConfig, commit_log: MappedFileQueue, consume_queues: ConsumeQueueStore,
                 index: IndexService | None, reput: ReputMessageService,
                 index_checkpoint: Callable[[], int]) -> None:
        super().__init__()
        self.config = config
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.index = index
        self.reput = reput  # the code the child runs; here its tagsCode hook and where recovery left it
        self.index_checkpoint = index_checkpoint  # the checkpoint's indexMsgTimestamp, for a restart
        self.arrival_listeners: list[ArrivalListener] = []
        self.reput_from_offset = 0
        self.last_store_timestamp = 0
        self.restarts = 0
        self._end_fd = -1  # the shared cell holding the CommitLog end, made at start
        self._end_map: mmap.mmap | None = None
        self._end = ctypes.c_int64()  # until then, a cell of our own
        self._sleeping = ctypes.c_int64()
        self._wake_fd = -1  # the write end of the child's wake pipe
        self._end_lock = threading.Lock()
        self._send_lock = threading.Lock()  # guards the connection's sending side
        self._call_lock = threading.Lock()  # one command in flight at a time
        self._replies: queue.Queue[Done | None] = queue.Queue()  # None: the child died
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def behind(self) -> int:
        return self.commit_log.max_offset - self.reput_from_offset

    def wakeup(self) -> None:
        """Publish the CommitLog end (after each put). Under a lock: a put of another thread may read a newer end
        and store it first, and the cell must never go back."""
        with self._end_lock:
            end = self.commit_log.max_offset
            if end > self._end.value:
                self._end.value = end
        if self._sleeping.value:  # read after the lock's release: the end's store comes first
            with self._end_lock:  # the pipe is not swapped or closed meanwhile
                self._sleeping.value = 0
                if self._wake_fd >= 0:
                    try:
                        os.write(self._wake_fd, b"\0")
                    except OSError:  # full (the child has bytes to wake on already) or the child is gone
                        pass

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.reput_from_offset = self.reput.reput_from_offset
        self.last_store_timestamp = self.reput.last_store_timestamp
        self._end_fd = os.memfd_create("rmq-commitlog-end")
        os.ftruncate(self._end_fd, mmap.PAGESIZE)
        self._end_map = mmap.mmap(self._end_fd, mmap.PAGESIZE)
        self._end = ctypes.c_int64.from_buffer(self._end_map, END_CELL)
        self._sleeping = ctypes.c_int64.from_buffer(self._end_map, SLEEPING_CELL)
        self._end.value = self.commit_log.max_offset
        super().start()
        self._started.wait()
        if self._start_error is not None:
            raise StoreError(f"cannot start the dispatch process: {self._start_error}") from self._start_error

    def shutdown(self) -> None:
        """Let the child dispatch everything written, then exit; the reader thread ends with it."""
        self.make_stop()
        self.wakeup()
        self._call(Stop(self.commit_log.max_offset))
        if self._proc is not None:
            try:
                self._proc.wait(CALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.error("dispatch process %d did not exit; killing it", self._proc.pid)
                self._proc.kill()
                self._proc.wait()
        super().shutdown()
        self._end = ctypes.c_int64(self._end.value)  # the map cannot close while ctypes holds it
        self._sleeping = ctypes.c_int64()
        if self._end_map is not None:
            self._end_map.close()
            os.close(self._end_fd)
        self._use_wake_pipe(-1)

    def _use_wake_pipe(self, fd: int) -> None:
        """Write wake-ups to ``fd`` (-1: to none) from now on, closing the pipe used so far."""
        with self._end_lock:
            old, self._wake_fd = self._wake_fd, fd
            if old >= 0:
                os.close(old)

    def delete_expired(self, min_commit_log_offset: int) -> None:
        self._call(DeleteExpired(min_commit_log_offset))

    def delete_topics(self, topics: set[str]) -> None:
        self._call(DeleteTopics(topics))

    def _call(self, command: DeleteExpired | DeleteTopics | Stop) -> bool:
        """Send ``command`` and wait for its Done; False (logged) when the child did not answer."""
        with self._call_lock:
            while not self._replies.empty():  # a death notice nobody waited for
                self._replies.get_nowait()
            try:
                with self._send_lock:
                    if self._conn is None:
                        raise OSError("no dispatch process")
                    self._conn.send(command)
                if self._replies.get(timeout=CALL_TIMEOUT_S) is not None:
                    return True
                err: BaseException = EOFError("the dispatch process died")
            except (OSError, queue.Empty) as raised:
                err = raised
            log.error("dispatch process did not answer %s: %r", command, err)
            return False

    # -- the reader thread --------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._spawn()
        except BaseException as err:  # reported by start()
            self._start_error = err
            return
        finally:
            self._started.set()
        while True:
            try:
                assert self._conn is not None
                message = decode_report(self._conn.recv_bytes())
            except (EOFError, OSError):
                if self.is_stopped():
                    return
                self._restart()
                continue
            except Exception:  # a report that cannot be read: the conversation is lost, start over
                log.exception("cannot read a report of dispatch process %s; killing it", self.pid)
                assert self._proc is not None
                self._proc.kill()  # the next recv ends in EOF, and another one starts
                continue
            if isinstance(message, Step):
                try:
                    self._apply(message)
                except Exception:  # never stop following silently: the next Step may apply
                    log.exception("cannot follow the dispatch process's step to offset %d",
                                  message.reput_from_offset)
                continue
            if isinstance(message.command, DeleteTopics):
                for topic in message.command.topics:
                    self.consume_queues.forget_topic(topic)
            self._replies.put(message)
            if isinstance(message.command, Stop):
                return

    def _apply(self, step: Step) -> None:
        self.consume_queues.follow(step.queues)
        if self.index is not None:
            self.index.follow(step.index_files, step.indexed_through)
        self.last_store_timestamp = step.last_store_timestamp
        self.reput_from_offset = step.reput_from_offset
        for listener in self.arrival_listeners:
            try:
                listener(step.arrivals)
            except Exception:
                log.exception("arrival listener %r failed", listener)

    def _spawn(self) -> None:
        parent_end, child_end = Pipe()
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(broker.__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root,
                                                                         os.environ.get("PYTHONPATH")])))
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, str(child_end.fileno()), str(self._end_fd), str(wake_read),
             str(os.getpid())], pass_fds=(child_end.fileno(), self._end_fd, wake_read), env=env)
        child_end.close()
        os.close(wake_read)
        self._use_wake_pipe(wake_write)
        self._conn = parent_end
        start = ChildStart(self.config, self.reput.tags_code_of, self.reput_from_offset, self.last_store_timestamp,
                           self.consume_queues.states(),
                           self.index.indexed_through if self.index is not None else -1,
                           logging.getLogger("broker").getEffectiveLevel(), current_logging())
        with self._send_lock:
            parent_end.send(start)
        first = decode_report(parent_end.recv_bytes())  # its first Step: it has loaded everything, dispatches now
        if not isinstance(first, Step):
            raise StoreError(f"the dispatch process answered its start with {first!r}, not a Step")
        self._apply(first)
        log.info("dispatch process %d started at CommitLog offset %d", self._proc.pid, self.reput_from_offset)

    def _restart(self) -> None:
        """The child died on its own: say so loudly, rebuild what it may have left half written, start another."""
        assert self._proc is not None
        status = self._proc.wait()
        self.restarts += 1
        self._replies.put(None)  # a command in flight gets no answer
        log.error("dispatch process %d exited with status %s at CommitLog offset %d; ConsumeQueues and the index "
                  "stop growing until another one runs: starting one (restart %d)", self._proc.pid, status,
                  self.reput_from_offset, self.restarts)
        if self.index is not None:
            self.index.follow([], -1)  # let go of every file, then load them as after a crash
            self.index.load(False, self.index_checkpoint())
            self.reput_from_offset = max(min(self.reput_from_offset, self.index.truncate(self.reput_from_offset)),
                                         self.commit_log.min_offset)
        if self._conn is not None:
            self._conn.close()
        while not self.pause(RESTART_PAUSE_S):  # no new child once shutdown began
            try:
                self._spawn()
            except (OSError, EOFError):
                log.exception("cannot start another dispatch process; trying again")
                continue
            if self.is_stopped():  # shutdown began while it started: its Stop went to the dead child's pipe
                with self._send_lock:
                    self._conn.send(Stop(self.commit_log.max_offset))
            return
