"""MappedFileQueue.follow: the view of a queue that another process writes; PrefaultService.poke."""

from __future__ import annotations

import os

from broker.store.mapped_file import MapMode, MappedFileQueue, PrefaultService


def test_follow_maps_what_the_writer_wrote_and_drops_what_it_deleted_or_never_reported(tmp_path):
    writer = MappedFileQueue(str(tmp_path / "q"), 100)
    for size in (100, 100, 100, 30):  # files 0, 100, 200, 300: the last holds 30 bytes
        writer.last_file_for_write().append(b"x" * size)
    reader = MappedFileQueue(str(tmp_path / "q"), 100, MapMode.READ)

    reader.follow(0, 250)  # the writer reported up to 250: file 300 exists but is not the reader's yet
    assert [(mf.file_from_offset, mf.wrote_position) for mf in reader.files] == [(0, 100), (100, 100), (200, 50)]
    assert reader.max_offset == 250 and bytes(reader.find(120).buffer[:3]) == b"xxx"

    writer.delete_first()
    reader.follow(100, 330)  # file 0 deleted: let go of it; file 300 now reported
    assert [(mf.file_from_offset, mf.wrote_position) for mf in reader.files] == [(100, 100), (200, 100), (300, 30)]

    os.remove(writer.files[-1].path)  # deleted by the writer after its report: the view ends before it
    reader.close()
    reader.follow(100, 330)
    assert [mf.file_from_offset for mf in reader.files] == [100, 200]
    assert not os.path.exists(writer.files[-1].path)  # and is not created again
    reader.close()
    writer.close()


def test_prefault_is_asked_for_only_while_the_file_has_pages_left_to_prefault(tmp_path):
    queue = MappedFileQueue(str(tmp_path / "q"), 64 * 1024)  # smaller than the window, as tests' CommitLogs are
    prefault = PrefaultService(queue, window=32 * 1024, chunk=16 * 1024)
    prefault.supported = True  # poke's decision is tested here, not madvise
    mf = queue.last_file_for_write()
    mf.append(b"x" * 100)
    prefault.poke(mf)
    assert prefault._wake.is_set()  # nothing prefaulted yet
    prefault._wake.clear()
    mf.prefaulted_position = mf.file_size  # prefaulted to its end, as run_once leaves a small file
    mf.append(b"x" * 60_000)
    prefault.poke(mf)
    assert not prefault._wake.is_set()  # a put must not wake the thread for nothing
    mf.append(b"x" * (mf.file_size - mf.wrote_position))
    prefault.poke(queue.last_file_for_write())  # the next file has pages to prefault again
    assert prefault._wake.is_set()
    queue.close()
