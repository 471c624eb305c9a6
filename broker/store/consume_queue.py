"""ConsumeQueue: the per-(topic, queueId) index of a CommitLog, as RocketMQ's ConsumeQueue.

A ConsumeQueue is a MappedFileQueue of 20-byte units (``layout.CQ_UNIT``: commitLogOffset, size, tagsCode) in
``{root}/{topic}/{queueId}/``, files named by their first byte offset. The logical (queue) offset of a unit is its
byte position divided by the unit size; ``layout.cq_pos``/``layout.cq_index`` are the only conversions.

It is derived data: the dispatcher appends a unit per CommitLog record, recovery cuts what the CommitLog no longer
holds, and the whole queue can be rebuilt from the log.

Threads: one writer (the dispatcher) appends, truncates and deletes; any number of readers. A reader takes the
written position of a file once and reads only below it; a MappedFile's bytes are written before its position
moves, so a reader never sees half a unit.

Blank units: RocketMQ fills the part of a queue that precedes its first unit (a queue whose early files were
deleted, rebuilt mid-file) with ``BLANK_UNIT`` (offset 0, size Integer.MAX_VALUE, tags 0), ``fillPreBlank``. A blank
unit passes the recovery check (offset >= 0 and size > 0), so the data after it survives a restart; an all-zero
unit would end the queue there. Readers can meet blank units below a hole and must skip them (``is_blank``).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from typing import NamedTuple

from broker.common.errors import ConfigError, IllegalName
from broker.store.layout import (
    CQ_UNIT_SIZE,
    CqUnit,
    cq_index,
    cq_pos,
    decode_cq_unit,
    encode_cq_unit,
    encode_cq_units,
    iter_cq_units,
)
from broker.store.mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

BLANK_UNIT = CqUnit(0, 0x7FFFFFFF, 0)  # Java fillPreBlank: putLong(0), putInt(Integer.MAX_VALUE), putLong(0)
_BLANK_BYTES = encode_cq_unit(*BLANK_UNIT)
NO_PHYSIC_OFFSET = -1  # max_physic_offset of a queue without units (Java's initial maxPhysicOffset)


class QueueState(NamedTuple):
    """What a reader in another process needs of a ConsumeQueue its writer changed (``ConsumeQueue.follow``)."""

    first_file_offset: int  # byte offset of the first file: files below it were deleted
    min_pos: int  # byte position of the first unit that points into the CommitLog
    max_pos: int  # byte position after the last unit
    max_physic_offset: int


def is_blank(unit: CqUnit) -> bool:
    return unit == BLANK_UNIT


def _is_valid(unit: CqUnit) -> bool:
    """Java's recovery check: the first unit failing it ends the queue's data."""
    return unit.commit_log_offset >= 0 and unit.size > 0


def check_topic_dir_name(topic: str) -> None:
    """Refuse a topic that would not be exactly one directory below the store root."""
    if topic in ("", ".", "..") or "/" in topic or "\0" in topic:
        raise IllegalName(f"topic {topic!r} cannot name a ConsumeQueue directory")


def _lower_bound(lo: int, hi: int, reached: Callable[[int], bool]) -> int:
    """The first index in [lo, hi) where ``reached`` is true (it must be monotone), else hi."""
    while lo < hi:
        mid = (lo + hi) // 2
        if reached(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _blank_prefix_units(data: bytes) -> int:
    """How many units at the start of ``data`` are blank. "The first k units are blank" is monotone in k."""
    return _lower_bound(0, cq_index(len(data)), lambda k: data[:cq_pos(k + 1)] != _BLANK_BYTES * (k + 1))


class ConsumeQueue:
    """One queue's units.

    Examples
    --------
    >>> cq = ConsumeQueue("TopicTest", 0, "/store/consumequeue", cq_pos(300_000))
    >>> cq.load(); cq.recover()
    >>> cq.put(cq.max_offset, commit_log_offset=4096, size=210, tags_code=0)
    True
    >>> cq.iter_units(cq.min_offset, 32)
    [CqUnit(commit_log_offset=4096, size=210, tags_code=0)]
    """

    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int) -> None:
        check_topic_dir_name(topic)
        if file_size <= 0 or file_size % CQ_UNIT_SIZE:
            raise ConfigError(f"ConsumeQueue file size {file_size} is not a positive multiple of {CQ_UNIT_SIZE}")
        self.topic = topic
        self.queue_id = queue_id
        self.directory = os.path.join(root_dir, topic, str(queue_id))
        self.file_size = file_size
        self._mfq = MappedFileQueue(self.directory, file_size)
        self._min_pos = 0  # Java minLogicOffset: byte position of the first unit that points into the CommitLog
        self._max_physic_offset = NO_PHYSIC_OFFSET

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic!r}, {self.queue_id}, min={self.min_offset}, max={self.max_offset})"

    # -- lifecycle ---------------------------------------------------------------------------------------------------

    def load(self) -> None:
        self._mfq.load()

    def recover(self) -> None:
        """Find the end of the valid units in the last three files (as Java), cut and zero what follows."""
        files = list(self._mfq.files)
        if not files:
            return
        end = files[max(0, len(files) - 3)].file_from_offset
        max_physic = NO_PHYSIC_OFFSET
        for mf in files[max(0, len(files) - 3):]:
            valid_bytes = 0
            for unit in iter_cq_units(mf.buffer.tobytes()):
                if not _is_valid(unit):
                    break
                valid_bytes += CQ_UNIT_SIZE
                if not is_blank(unit):
                    max_physic = unit.commit_log_offset + unit.size
            end = mf.file_from_offset + valid_bytes
            if valid_bytes < self.file_size:
                break
        log.info("ConsumeQueue %s-%d recovered up to byte %d", self.topic, self.queue_id, end)
        self._mfq.truncate(end)
        self._max_physic_offset = max_physic
        self._min_pos = self._first_unblank_pos()

    def _first_unblank_pos(self) -> int:
        """The queue starts after the blank units that precede its first unit in its first file."""
        if not self._mfq.files:
            return 0
        first = self._mfq.files[0]
        blanks = _blank_prefix_units(first.buffer[:first.wrote_position].tobytes())
        return first.file_from_offset + cq_pos(blanks)

    def state(self) -> QueueState:
        return QueueState(self._mfq.min_offset, self._min_pos, self._mfq.max_offset, self._max_physic_offset)

    def follow(self, state: QueueState) -> None:
        """Take ``state`` from the queue's writer in another process (the dispatch process): map what it wrote,
        forget what it deleted. Also how that writer starts from the state its parent recovered."""
        self._mfq.follow(state.first_file_offset, state.max_pos)
        self._min_pos = state.min_pos
        self._max_physic_offset = state.max_physic_offset

    def flush(self) -> None:
        self._mfq.flush()

    def close(self) -> None:
        self._mfq.close()

    def destroy(self) -> None:
        """Delete every file and the queue's directory."""
        self._mfq.delete_all()
        shutil.rmtree(self.directory, ignore_errors=True)
        self._min_pos = 0
        self._max_physic_offset = NO_PHYSIC_OFFSET

    # -- offsets -----------------------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        """The first logical offset that points into the CommitLog (never above max_offset)."""
        end = self._mfq.max_offset
        return cq_index(min(max(self._min_pos, self._mfq.min_offset), end))

    @property
    def max_offset(self) -> int:
        """The next logical offset to be written."""
        return cq_index(self._mfq.max_offset)

    @property
    def max_physic_offset(self) -> int:
        """CommitLog end of the last unit (offset + size), NO_PHYSIC_OFFSET when there is none."""
        return self._max_physic_offset

    # -- write path --------------------------------------------------------------------------------------------------

    def put(self, queue_offset: int, commit_log_offset: int, size: int, tags_code: int) -> bool:
        """Append the unit for queue offset ``queue_offset`` (Java putMessagePositionInfo). A unit the queue
        already covers (re-dispatch after a restart) is ignored; False means the queue offset is already taken."""
        if commit_log_offset + size <= self._max_physic_offset:
            log.debug("ConsumeQueue %s-%d: unit at %d already built (max physic offset %d)", self.topic,
                      self.queue_id, commit_log_offset, self._max_physic_offset)
            return True
        target = cq_pos(queue_offset)
        if not self._mfq.files:
            # The first file starts at the file boundary below the first unit, not mid-file as MappedFileQueue
            # could start it, so that a file's wrote position only ever covers bytes already written.
            self._mfq.last_file_for_write(target - target % self.file_size)
        end = self._mfq.max_offset
        if target < end:
            log.warning("ConsumeQueue %s-%d: queue offset %d is below the end %d; unit at %d not written",
                        self.topic, self.queue_id, queue_offset, cq_index(end), commit_log_offset)
            return False
        if target > end:
            if self.min_offset == cq_index(end):  # no unit yet: the queue starts here (Java isFirstCreateInQueue)
                log.info("ConsumeQueue %s-%d starts at queue offset %d", self.topic, self.queue_id, queue_offset)
                self._min_pos = target
            else:
                log.warning("ConsumeQueue %s-%d: hole at queue offsets %d..%d filled with blank units", self.topic,
                            self.queue_id, cq_index(end), queue_offset - 1)
            self._fill_blanks(end, target)
        self._mfq.last_file_for_write().append(encode_cq_unit(commit_log_offset, size, tags_code))
        self._max_physic_offset = commit_log_offset + size
        return True

    def put_units(self, units: list[tuple[int, int, int, int]]) -> None:
        """Append units (queue offset, commit log offset, size, tagsCode), in queue order. Once they continue the
        queue exactly (the normal case) the rest are written in one go; until then one by one through ``put``."""
        count = len(units)
        for i, (queue_offset, commit_log_offset, size, tags_code) in enumerate(units):
            if (self._mfq.files and cq_pos(queue_offset) == self._mfq.max_offset
                    and commit_log_offset + size > self._max_physic_offset
                    and units[-1][0] - queue_offset == count - 1 - i):
                self._append(encode_cq_units(units[i:] if i else units))
                last = units[-1]
                self._max_physic_offset = last[1] + last[2]
                return
            self.put(queue_offset, commit_log_offset, size, tags_code)

    def _append(self, data: bytes) -> None:
        """Whole units at the end, across as many files as it takes. A reader sees each file's part once its bytes
        are written (MappedFile.append moves the position last)."""
        view = memoryview(data)
        while view:
            mf = self._mfq.last_file_for_write()
            n = min(mf.free_space, len(view))
            mf.append(view[:n])
            view = view[n:]

    def _fill_blanks(self, end: int, target: int) -> None:
        """Blank units from byte ``end`` to ``target`` (Java fillPreBlank), across as many files as it takes."""
        while end < target:
            mf = self._mfq.last_file_for_write()
            count = min(mf.free_space, target - end)
            mf.append(_BLANK_BYTES * cq_index(count))
            end += count

    def truncate_dirty(self, commit_log_end: int) -> None:
        """Drop (and zero on disk) the units from the first one pointing at or beyond ``commit_log_end``; used
        when recovery cut the CommitLog's tail. Scans back from the last file, as Java truncateDirtyLogicFiles."""
        cut = None
        for mf in reversed(list(self._mfq.files)):
            if mf.wrote_position == 0:  # an empty last file, left by an earlier cut at a file boundary
                cut = mf.file_from_offset
                continue
            data = mf.buffer[:mf.wrote_position].tobytes()
            first_dirty = next((i for i, u in enumerate(iter_cq_units(data))
                                if u.commit_log_offset >= commit_log_end and not is_blank(u)), None)
            if first_dirty is None:
                cut = mf.end_offset
                break
            cut = mf.file_from_offset + cq_pos(first_dirty)
            if first_dirty > 0:
                break
        if cut is None or cut == self._mfq.max_offset:
            return
        self._mfq.truncate(cut)
        self._min_pos = min(self._min_pos, cut)
        self._max_physic_offset = self._last_physic_end()
        log.info("ConsumeQueue %s-%d truncated to queue offset %d", self.topic, self.queue_id, cq_index(cut))

    def _last_physic_end(self) -> int:
        for mf in reversed(list(self._mfq.files)):
            for rel in range(mf.wrote_position - CQ_UNIT_SIZE, -1, -CQ_UNIT_SIZE):
                unit = decode_cq_unit(mf.buffer, rel)
                if not is_blank(unit):
                    return unit.commit_log_offset + unit.size
        return NO_PHYSIC_OFFSET

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Delete the leading files whose last unit points below the CommitLog's minimum (never the last file),
        then move min_offset to the first unit still in the CommitLog (Java correctMinOffset)."""
        deleted = 0
        while len(self._mfq.files) > 1:
            first = self._mfq.files[0]
            if decode_cq_unit(first.buffer, self.file_size - CQ_UNIT_SIZE).commit_log_offset >= min_commit_log_offset:
                break
            log.info("ConsumeQueue %s-%d: deleting %s, all below CommitLog offset %d", self.topic, self.queue_id,
                     first.path, min_commit_log_offset)
            self._mfq.delete_first()
            deleted += 1
        self.correct_min_offset(min_commit_log_offset)
        return deleted

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """Move min_offset up to the first unit whose record the CommitLog still holds (recovery calls this
        alone, as Java recoverOffsetTable). Units point to increasing CommitLog offsets, so a binary search."""
        lo, hi = self.min_offset, self.max_offset

        def in_log(q: int) -> bool:
            unit = self.get_unit(q)
            return unit is not None and not is_blank(unit) and unit.commit_log_offset >= min_commit_log_offset

        self._min_pos = cq_pos(_lower_bound(lo, hi, in_log))

    # -- read path ---------------------------------------------------------------------------------------------------

    def _file_at(self, pos: int) -> MappedFile | None:
        return self._mfq.find(pos)

    def get_unit(self, queue_offset: int) -> CqUnit | None:
        """The unit at ``queue_offset``, None outside [min_offset, max_offset)."""
        if queue_offset < self.min_offset:
            return None
        pos = cq_pos(queue_offset)
        mf = self._file_at(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + CQ_UNIT_SIZE > mf.wrote_position:
            return None
        try:
            return decode_cq_unit(mf.buffer, rel)
        except ValueError:  # the file was deleted under us
            return None

    def iter_units(self, start_offset: int, max_count: int) -> list[CqUnit]:
        """Up to ``max_count`` contiguous units from ``start_offset``, across files; [] when ``start_offset`` is
        outside [min_offset, max_offset). Blank units are returned as they are (see ``is_blank``)."""
        return list(iter_cq_units(self.read_units(start_offset, max_count)))

    def read_units(self, start_offset: int, max_count: int) -> bytes:
        """The raw bytes of the units ``iter_units`` returns, for a reader of many at once (``CQ_UNIT.iter_unpack``)."""
        if max_count <= 0 or start_offset < self.min_offset:
            return b""
        pos = cq_pos(start_offset)
        end = cq_pos(min(start_offset + max_count, self.max_offset))
        parts: list[bytes] = []
        while pos < end:
            mf = self._file_at(pos)
            if mf is None:
                break
            stop = min(end - mf.file_from_offset, mf.wrote_position)
            rel = pos - mf.file_from_offset
            if stop <= rel:
                break
            try:
                parts.append(mf.buffer[rel:stop].tobytes())
            except ValueError:  # the file was deleted under us
                break
            pos = mf.file_from_offset + stop
        return b"".join(parts)

    def offset_for_timestamp(self, timestamp: int, store_time_at: Callable[[int, int], int | None]) -> int:
        """The first queue offset whose record was stored at or after ``timestamp`` (RocketMQ 5
        getOffsetInQueueByTime, BoundaryType.LOWER, clamped to [min_offset, max_offset] as ConsumeQueueStore does):
        max_offset when every record is older. ``store_time_at(commit_log_offset, size)`` gives a record's store
        time, None when the CommitLog no longer has it; such records and blank units count as older."""

        def stored_since(q: int) -> bool:
            unit = self.get_unit(q)
            if unit is None or is_blank(unit):
                return False
            store_time = store_time_at(unit.commit_log_offset, unit.size)
            return store_time is not None and store_time >= timestamp

        return _lower_bound(self.min_offset, self.max_offset, stored_since)


class ConsumeQueueStore:
    """Every ConsumeQueue under ``root_dir`` (``{root_dir}/{topic}/{queueId}/``).

    Examples
    --------
    >>> store = ConsumeQueueStore(config.consume_queue_dir, config.mapped_file_size_consume_queue)
    >>> store.load(); store.recover()
    >>> store.find_or_create("TopicTest", 0).put(0, 0, 210, 0)
    True
    """

    def __init__(self, root_dir: str, file_size: int) -> None:
        self.root_dir = root_dir
        self.file_size = file_size
        self._table: dict[str, dict[int, ConsumeQueue]] = {}
        self._lock = threading.Lock()  # guards creation and removal; lookups read the dicts as they are

    def load(self) -> None:
        """Map every ``{topic}/{queueId}`` directory; anything else under the root is left alone."""
        if not os.path.isdir(self.root_dir):
            return
        for topic in sorted(os.listdir(self.root_dir)):
            topic_dir = os.path.join(self.root_dir, topic)
            if not os.path.isdir(topic_dir):
                continue
            for name in sorted(os.listdir(topic_dir)):
                if not (name.isdigit() and str(int(name)) == name and os.path.isdir(os.path.join(topic_dir, name))):
                    log.warning("ignoring %s: not a ConsumeQueue directory", os.path.join(topic_dir, name))
                    continue
                cq = ConsumeQueue(topic, int(name), self.root_dir, self.file_size)
                cq.load()
                self._table.setdefault(topic, {})[cq.queue_id] = cq

    def recover(self) -> None:
        for cq in self.queues():
            cq.recover()

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.get(topic, queue_id)
        if cq is not None:
            return cq
        with self._lock:
            queues = self._table.setdefault(topic, {})
            cq = queues.get(queue_id)
            if cq is None:
                cq = queues[queue_id] = ConsumeQueue(topic, queue_id, self.root_dir, self.file_size)
            return cq

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        check_topic_dir_name(topic)
        queues = self._table.get(topic)
        return queues.get(queue_id) if queues is not None else None

    def queues(self) -> Iterator[ConsumeQueue]:
        with self._lock:
            snapshot = [cq for queues in self._table.values() for cq in queues.values()]
        return iter(snapshot)

    def topics(self) -> list[str]:
        with self._lock:
            return list(self._table)

    def states(self) -> dict[tuple[str, int], QueueState]:
        return {(cq.topic, cq.queue_id): cq.state() for cq in self.queues()}

    def follow(self, states: dict[tuple[str, int], QueueState]) -> None:
        for (topic, queue_id), state in states.items():
            self.find_or_create(topic, queue_id).follow(state)

    def forget_topic(self, topic: str) -> None:
        """Unmap the topic's queues, whose files another process deleted (``delete_topic`` there)."""
        with self._lock:
            queues = self._table.pop(topic, {})
        for cq in queues.values():
            cq.close()

    def truncate_dirty(self, commit_log_end: int) -> None:
        for cq in self.queues():
            cq.truncate_dirty(commit_log_end)

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Returns the number of files deleted over all queues."""
        return sum(cq.delete_expired(min_commit_log_offset) for cq in self.queues())

    def flush_all(self) -> None:
        for cq in self.queues():
            cq.flush()

    def close(self) -> None:
        for cq in self.queues():
            cq.close()

    def delete_topic(self, topic: str) -> None:
        """Destroy the topic's queues and remove its directory."""
        check_topic_dir_name(topic)
        with self._lock:
            queues = self._table.pop(topic, {})
        for cq in queues.values():
            cq.destroy()
        shutil.rmtree(os.path.join(self.root_dir, topic), ignore_errors=True)

    @property
    def max_physic_offset(self) -> int:
        """The furthest CommitLog end any unit points to: where dispatch stopped (NO_PHYSIC_OFFSET when none)."""
        return max((cq.max_physic_offset for cq in self.queues()), default=NO_PHYSIC_OFFSET)
