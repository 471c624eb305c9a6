"""The dispatch process's side (dispatchMode=PROCESS): what runs in the child that ``dispatch_process.DispatchProcess``
starts. It maps the CommitLog read-only and the ConsumeQueue and IndexFile files read-write, runs the same
ReputMessageService, BuildConsumeQueue and BuildIndex as a dispatch thread would, and reports each step to the broker.

The conversation (its messages, and why each process does what) is ``broker/store/dispatch_process.py``'s; this module
only answers it. The child's entry point is ``main``, run as ``python -c`` (not ``-m``, or its messages would be
pickled as __main__'s).
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import select
import signal
import threading
import time
from multiprocessing.connection import Connection

from broker.common.logs import LINE_FORMAT, follow_logging
from broker.store.consume_queue import ConsumeQueueStore, QueueState
from broker.store.dispatch import Arrivals, BuildConsumeQueue, BuildIndex, CommitLogDispatcher, ReputMessageService
from broker.store.dispatch_process import (
    END_CELL,
    SLEEP_AFTER_S,
    SLEEP_POLL_MS,
    SLEEPING_CELL,
    ChildStart,
    DeleteExpired,
    DeleteTopics,
    Done,
    Step,
    Stop,
    encode_report,
)
from broker.store.index_service import IndexService
from broker.store.mapped_file import MapMode, MappedFileQueue

log = logging.getLogger(__name__)

IDLE_POLL_MS = 1  # between dispatch passes (Java's ReputMessageService: 1 ms)
REPORT_INTERVAL_S = 0.002  # within a long pass (a backlog), the child reports at most this often
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the thread that started it ends (the broker died): PR_SET_PDEATHSIG. If the broker
    died before this call, the parent is already someone else."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent_pid:
        os._exit(1)


class DispatchChild:
    """The child's state: its view of the CommitLog and the derived files it writes."""

    def __init__(self, conn: Connection, start: ChildStart, shared: mmap.mmap, wake_fd: int) -> None:
        config = start.config
        self.conn = conn
        self.end = ctypes.c_int64.from_buffer(shared, END_CELL)
        self.sleeping = ctypes.c_int64.from_buffer(shared, SLEEPING_CELL)
        self.wake_fd = wake_fd
        self._fence = threading.Lock()  # its acquire and release: an atomic operation between two cells' accesses
        self.commit_log = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log, MapMode.READ)
        self.consume_queues = ConsumeQueueStore(config.consume_queue_dir, config.mapped_file_size_consume_queue)
        self.consume_queues.load()
        self.consume_queues.follow(start.queues)
        self.index = (IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
                      if config.message_index_enable else None)
        dispatchers: list[CommitLogDispatcher] = [BuildConsumeQueue(self.consume_queues)]
        if self.index is not None:
            self.index.load(True, 0)
            self.index.follow(None, start.indexed_through)
            dispatchers.append(BuildIndex(self.index))
        self.reput = ReputMessageService(self.commit_log, dispatchers, start.tags_code_of)
        self.reput.reput_from_offset = start.reput_from_offset
        self.reput.last_store_timestamp = start.last_store_timestamp
        self.reput.arrival_listeners.append(self.on_step)
        self._index_files: list[str] = []
        self._arrivals: Arrivals = {}  # of the steps not reported yet
        self._reported_at = 0.0
        self._reported_offset = start.reput_from_offset

    def on_step(self, arrivals: Arrivals) -> None:
        """The arrival listener of the child's ReputMessageService: collect, report at most every REPORT_INTERVAL_S
        within a pass (each report costs the broker's GIL a little); ``serve`` reports the rest after the pass."""
        pending = self._arrivals
        for key, (max_offset, codes) in arrivals.items():
            known = pending.get(key)
            pending[key] = (max_offset, codes) if known is None else (max_offset, known[1] + codes)
        if time.monotonic() - self._reported_at >= REPORT_INTERVAL_S:
            self.report()

    def report(self, queues: dict[tuple[str, int], QueueState] | None = None) -> None:
        """Send a Step with what changed since the last one (``queues``: these queue states besides)."""
        arrivals, self._arrivals = self._arrivals, {}
        queues = dict(queues or {})
        for topic, queue_id in arrivals:
            cq = self.consume_queues.get(topic, queue_id)
            if cq is not None:
                queues[topic, queue_id] = cq.state()
        names = None
        indexed_through = -1
        if self.index is not None:
            indexed_through = self.index.indexed_through
            current = [f.file_name for f in self.index.files]
            if current != self._index_files:
                names = self._index_files = current
        self.conn.send_bytes(encode_report(Step(self.reput.reput_from_offset, self.reput.last_store_timestamp, queues,
                                                arrivals, names, indexed_through)))
        self._reported_at = time.monotonic()
        self._reported_offset = self.reput.reput_from_offset

    def follow_commit_log(self) -> None:
        end = self.end.value
        if end != self.commit_log.max_offset or not self.commit_log.files:
            self.commit_log.follow(self.reput.reput_from_offset, end)

    def serve(self) -> None:
        """Dispatch what the broker writes, and answer its commands, until told to stop. A pass takes everything
        written so far and reports it; the next pass comes IDLE_POLL_MS later, as Java's reput thread sleeps 1 ms
        after each pass. Under a trickle of sync sends a pass right after the last one found one record, and a pass
        with its report costs about as much CPU for one record as for fifty, plus a turn of the broker's GIL: a
        message cost dispatch more than it cost the broker to store it. A long-polling pull still hears of a put
        within about 1 ms, as from Java's broker. After SLEEP_AFTER_S without a put the child sleeps until the
        broker's next put wakes it (dispatch_process's docstring)."""
        poller = select.poll()  # made once: ``Connection.poll`` builds a selector on every call
        poller.register(self.conn.fileno(), select.POLLIN)
        poller.register(self.wake_fd, select.POLLIN)
        seen_end, put_at = self.end.value, time.monotonic()
        while True:
            self.follow_commit_log()
            try:
                self.reput.do_reput()
            except Exception:  # as the dispatch thread: a bug must not stop all future dispatching silently
                log.exception("dispatch failed at offset %d", self.reput.reput_from_offset)
                time.sleep(1)
            if self.reput.reput_from_offset != self._reported_offset:
                self.report()
            timeout = IDLE_POLL_MS
            now = time.monotonic()
            if self.end.value != seen_end:
                seen_end, put_at = self.end.value, now
            elif now - put_at >= SLEEP_AFTER_S and self._fall_asleep(seen_end):
                timeout = SLEEP_POLL_MS
            events = poller.poll(timeout)
            self.sleeping.value = 0
            for fd, _ in events:
                if fd == self.wake_fd:
                    self._drain_wake_pipe()
                elif self.command(self.conn.recv()):
                    return

    def _fall_asleep(self, seen_end: int) -> bool:
        """Say so in the shared page, then look at the end once more: a put stored before this look is dispatched
        now; one after it finds the cell set and wakes this process (dispatch_process's docstring)."""
        self.sleeping.value = 1
        with self._fence:
            pass
        if self.end.value != seen_end:
            self.sleeping.value = 0
            return False
        return True

    def _drain_wake_pipe(self) -> None:
        try:
            while os.read(self.wake_fd, 4096):
                pass
        except BlockingIOError:
            pass

    def command(self, command: DeleteExpired | DeleteTopics | Stop) -> bool:
        """Carry out ``command``, report, answer; True when the child should exit."""
        if isinstance(command, Stop):
            while self.reput.reput_from_offset < command.commit_log_end:
                before = self.reput.reput_from_offset
                self.follow_commit_log()
                self.reput.do_reput()
                if self.reput.reput_from_offset == before:
                    log.error("dispatch stops at %d, before the CommitLog end %d", before, command.commit_log_end)
                    break
            self.report()
            if self.index is not None:
                self.index.close()
            self.consume_queues.close()
        elif isinstance(command, DeleteExpired):
            self.commit_log.follow(self.reput.reput_from_offset, self.end.value)  # unmap what retention deleted
            self.reput.delete_expired(command.min_commit_log_offset)
            self.report(self.consume_queues.states())
        else:
            self.reput.delete_topics(command.topics)
            self.report()
        self.conn.send_bytes(encode_report(Done(command)))
        return isinstance(command, Stop)


def main(argv: list[str]) -> int:
    conn_fd, end_fd, wake_fd, parent_pid = (int(arg) for arg in argv)
    _die_with_parent(parent_pid)
    # A signal to the whole process group (Ctrl-C in a terminal, systemd stopping the unit's cgroup) is for the
    # broker: it stops this child with Stop once everything written is dispatched, and its death kills this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn = Connection(conn_fd)
    start: ChildStart = conn.recv()
    threading.current_thread().name = "DispatchProcess"  # tells the two processes' lines apart
    if start.log_files is not None:
        follow_logging(*start.log_files)  # the broker's files, which the broker rolls
    else:  # a store embedded without log files: stderr, at the embedding process's level
        logging.basicConfig(level=start.log_level, format=LINE_FORMAT)
    log.info("dispatch process %d dispatches from CommitLog offset %d", os.getpid(), start.reput_from_offset)
    child = DispatchChild(conn, start, mmap.mmap(end_fd, mmap.PAGESIZE), wake_fd)
    try:
        child.report()  # ready
        child.serve()
    except (EOFError, BrokenPipeError):  # the broker closed its end: it is going away
        return 0
    return 0
