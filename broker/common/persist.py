"""Files written without tearing: the crash-safe write and load of the broker's metadata and the client's offsets.

``write_atomic`` is MixAll.string2File / ConfigManager.persist made crash-safe::

    1. write  name.tmp, fsync it          crash here: name is untouched, .tmp is partial
    2. rename name -> name.bak            crash here: no name; .tmp is complete; .bak is the previous version
    3. rename name.tmp -> name            crash here: name is the new version
    4. fsync the directory

Java moves the file to .bak and then rewrites it in place, so a crash mid-write leaves a torn file. ``load_json``
reads ``name``; if it is missing it takes a ``.tmp`` that parses (the crash between 2 and 3: that is the newest
complete version, fsynced before any rename), then ``.bak``. A corrupt ``name`` is moved aside to
``name.corrupt`` (Java deletes it) so that the next write cannot rotate it into ``.bak`` over the good copy.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from broker.common.errors import MetadataCorrupt
from broker.common.fastjson import decode_json

log = logging.getLogger(__name__)

T = TypeVar("T")

TMP_SUFFIX = ".tmp"
BAK_SUFFIX = ".bak"
CORRUPT_SUFFIX = ".corrupt"


# -- atomic files -----------------------------------------------------------------------------------------------------

_write_lock = threading.Lock()  # MixAll.string2File is synchronized: two writers must not share one .tmp


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8), keeping the previous version as ``path.bak``; see the module doc."""
    directory = os.path.dirname(path) or "."
    tmp = path + TMP_SUFFIX
    with _write_lock:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            os.replace(path, path + BAK_SUFFIX)
        os.replace(tmp, path)
        _fsync_dir(directory)


def persist_quietly(persist: Callable[[], None], path: str) -> bool:
    """Run a manager's ``persist`` after a change, logging instead of raising (Java's ConfigManager.persist does
    the same): the change is already live in memory, and the next persist writes it. False if it failed."""
    try:
        persist()
    except OSError:
        log.exception("failed to persist %s; the change is kept in memory and written by the next persist", path)
        return False
    return True


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        return None


def _try_decode(path: str, decode: Callable[[Any], T]) -> tuple[T | None, str | None]:
    """(value, None) when ``path`` holds a decodable file, (None, None) when it is missing or empty, else
    (None, reason)."""
    try:
        text = _read_text(path)
        if not text:
            return None, None
        return decode(decode_json(text)), None
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as err:
        return None, f"{type(err).__name__}: {err}"


def load_json(path: str, decode: Callable[[Any], T]) -> T | None:
    """Load ``path`` through ``decode`` (parsed JSON -> value), falling back as the module doc says.

    Returns None when there is nothing to load (a fresh store). Raises MetadataCorrupt when ``path`` exists but is
    unreadable and so is every fallback: Java would start empty there, which silently drops topics and offsets.
    """
    value, reason = _try_decode(path, decode)
    if value is not None:
        return value
    if reason is not None:
        log.error(
            "metadata file %s is unreadable (%s); moving it to %s and trying the backup",
            path,
            reason,
            path + CORRUPT_SUFFIX,
        )
        os.replace(path, path + CORRUPT_SUFFIX)
    elif os.path.exists(path + TMP_SUFFIX):
        value, tmp_reason = _try_decode(path + TMP_SUFFIX, decode)
        if value is not None:
            log.warning("recovered %s from %s (a write was interrupted before its rename)", path, TMP_SUFFIX)
            return value
        log.info("ignoring the incomplete %s%s (%s)", path, TMP_SUFFIX, tmp_reason)
    value, bak_reason = _try_decode(path + BAK_SUFFIX, decode)
    if value is not None:
        log.warning("loaded %s from its backup %s%s", path, path, BAK_SUFFIX)
        return value
    if bak_reason is not None:
        raise MetadataCorrupt(path, f"backup: {bak_reason}" + (f"; file: {reason}" if reason else ""))
    if reason is not None:
        raise MetadataCorrupt(path, f"{reason}; no backup")
    return None
