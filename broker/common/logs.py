"""Log files where Apache RocketMQ's servers write theirs, rotated as theirs are, and what goes to stderr.

Rule 1: which logger writes which file, each file's rotation and the console's share are decided here and nowhere
else; ``mqnamesrv``, ``mqbroker`` and the broker's dispatch process call ``start_logging`` or ``follow_logging``,
and any other long-running process of ours (the sink's resolver) may describe its own files with a ``LogLayout``.

Apache's logback files (rmq.namesrv.logback.xml, rmq.broker.logback.xml) write under ``${user.home}/logs/
rocketmqlogs`` (``isolateLogEnable=true``: a ``{brokerName}_{brokerId}`` directory under it), one file per logger
family, each rolled at a size into ``otherdays/{name}.{i}.log.gz`` with ``i`` = 1 the newest, keeping a fixed
number. The files, sizes and counts here are Apache's; our loggers (``broker.store...``) map onto its families
(``RocketmqStore`` -> store.log). Relocate them as a JVM's ``-Duser.home`` does with ``logDir`` (a key of
namesrv.conf and broker.conf) or the ``RMQ_LOG_DIR`` environment variable (the key wins, as a file's namesrvAddr
wins over NAMESRV_ADDR); ``logMaxFileSize`` and ``logMaxIndex`` replace every file's size and count (tests roll
files after a few hundred lines).

Who writes where:
- files: INFO and above, every logger (Apache's loggers are all at INFO);
- stderr: ``logConsoleLevel`` and above (``RMQ_LOG_CONSOLE_LEVEL``; default WARN, so a supervisor's journal or a
  terminal shows what needs attention while the files keep the history; ``INFO`` copies everything, ``OFF`` none);
- stdout: the boot lines and the paths a server uses, always (``print``: Apache's console logger).

The files are written by one thread per process (``QueueListener``): an event loop hands a record over and goes on,
and never waits for a disk or for the gzip of a rolled 128 MiB file. The dispatch process appends to the broker's
files without rolling them (``follow_logging``); the broker rolls them, and the child reopens a file it finds
renamed.
"""

from __future__ import annotations

import atexit
import gzip
import logging
import logging.handlers
import os
import queue
import shutil
import sys
from dataclasses import dataclass
from enum import StrEnum

from broker.common.errors import ConfigError

LOG_DIR_ENV = "RMQ_LOG_DIR"
CONSOLE_LEVEL_ENV = "RMQ_LOG_CONSOLE_LEVEL"
ROLLED_DIR = "otherdays"  # Apache's directory of rolled files, next to the live ones
LINE_FORMAT = "%(asctime)s %(levelname)s %(threadName)s %(name)s - %(message)s"  # Apache: "%d %p %t - %m%n"
FILE_LEVEL = logging.INFO
MiB = 1024 * 1024  # logback's "100MB" is 100 * 1024 * 1024 bytes


class LogLevel(StrEnum):
    """A console level as Apache's logback spells it (``WARNING`` is accepted for ``WARN``)."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARN = "WARN"
    WARNING = "WARN"
    ERROR = "ERROR"
    OFF = "OFF"

    @property
    def levelno(self) -> int:
        return logging.CRITICAL + 1 if self is LogLevel.OFF else logging.getLevelName(self.name)


def default_log_dir() -> str:
    """``$RMQ_LOG_DIR`` (made absolute), else Apache's ``~/logs/rocketmqlogs``."""
    configured = os.environ.get(LOG_DIR_ENV, "")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    return os.path.join(os.path.expanduser("~"), "logs", "rocketmqlogs")


def default_console_level() -> LogLevel:
    """``$RMQ_LOG_CONSOLE_LEVEL``, else WARN."""
    configured = os.environ.get(CONSOLE_LEVEL_ENV, "").strip()
    if not configured:
        return LogLevel.WARN
    try:
        return LogLevel[configured.upper()]
    except KeyError:
        raise ConfigError(f"bad value for {CONSOLE_LEVEL_ENV}: {configured!r} (one of "
                          f"{', '.join(LogLevel.__members__)})") from None


@dataclass(frozen=True, slots=True)
class LogFile:
    """One of Apache's files: rolled at ``max_file_size`` bytes, ``max_index`` rolled copies kept."""

    name: str
    max_file_size: int
    max_index: int


@dataclass(frozen=True, slots=True)
class LogLayout:
    """Which logger writes which file: the longest matching prefix of ``routes``, else ``default``."""

    default: LogFile
    routes: tuple[tuple[str, LogFile], ...] = ()

    def file_for(self, logger_name: str) -> LogFile:
        best, best_len = self.default, -1
        for prefix, log_file in self.routes:
            if len(prefix) > best_len and (logger_name == prefix or logger_name.startswith(prefix + ".")):
                best, best_len = log_file, len(prefix)
        return best

    def files(self) -> tuple[LogFile, ...]:
        return tuple(dict.fromkeys([self.default, *(f for _, f in self.routes)]))


# rmq.namesrv.logback.xml: RocketmqNamesrv, RocketmqCommon and RocketmqRemoting share namesrv.log.
NAMESRV_LAYOUT = LogLayout(
    default=LogFile("namesrv_default.log", 100 * MiB, 5),
    routes=(("broker", LogFile("namesrv.log", 100 * MiB, 5)),),
)

_BROKER_LOG = LogFile("broker.log", 128 * MiB, 20)  # RocketmqBroker and RocketmqCommon
_STORE_LOG = LogFile("store.log", 128 * MiB, 10)  # RocketmqStore: the store and its HA services
# rmq.broker.logback.xml, our loggers by Apache's families; anything else (asyncio, uvloop) is broker_default.log's.
BROKER_LAYOUT = LogLayout(
    default=LogFile("broker_default.log", 100 * MiB, 10),
    routes=(
        ("broker", _BROKER_LOG),
        ("broker.store", _STORE_LOG),
        ("broker.replication", _STORE_LOG),
        ("broker.remoting", LogFile("remoting.log", 100 * MiB, 10)),
        ("broker.server.transaction", LogFile("transaction.log", 100 * MiB, 10)),
        ("broker.server.filter", LogFile("filter.log", 100 * MiB, 10)),
    ),
)


@dataclass(frozen=True, slots=True)
class LogSettings:
    """Where a server's files go and how they roll (the ``log*`` keys), and what stderr gets.

    ``max_file_size`` and ``max_index`` of 0 keep each file's own (Apache's) size and count."""

    log_dir: str
    max_file_size: int = 0
    max_index: int = 0
    console_level: LogLevel = LogLevel.WARN

    def __post_init__(self) -> None:
        if not self.log_dir:
            raise ConfigError("bad value for logDir: empty (a directory for the log files)")
        if self.max_file_size < 0:
            raise ConfigError(f"bad value for logMaxFileSize: {self.max_file_size} (bytes, or 0 for Apache's sizes)")
        if self.max_index < 0:
            raise ConfigError(f"bad value for logMaxIndex: {self.max_index} (rolled files kept, or 0 for Apache's)")

    def rolling(self, log_file: LogFile) -> LogFile:
        """``log_file`` with this server's overrides applied."""
        return LogFile(log_file.name, self.max_file_size or log_file.max_file_size,
                       self.max_index or log_file.max_index)

    def path(self, log_file: LogFile) -> str:
        return os.path.join(self.log_dir, log_file.name)


def rolled_path(log_dir: str, name: str, index: int) -> str:
    """Where the ``index``-th rolled copy of file ``name`` lives: ``otherdays/broker.1.log.gz``."""
    stem, dot, ext = name.rpartition(".")
    return os.path.join(log_dir, ROLLED_DIR, f"{stem}.{index}.{ext}.gz" if dot else f"{name}.{index}.gz")


class _RollingFile(logging.handlers.RotatingFileHandler):
    """RotatingFileHandler with Apache's window: ``otherdays/{stem}.{i}.log.gz``, gzipped as it rolls."""

    def __init__(self, path: str, log_file: LogFile) -> None:
        super().__init__(path, maxBytes=log_file.max_file_size, backupCount=log_file.max_index, encoding="utf-8")
        self._log_dir, self._name = os.path.dirname(path), log_file.name

    def rotation_filename(self, default_name: str) -> str:
        index = int(default_name.rsplit(".", 1)[1])  # RotatingFileHandler asks for "{path}.{i}"
        return rolled_path(self._log_dir, self._name, index)

    def rotate(self, source: str, dest: str) -> None:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if not os.path.exists(source):
            return
        partial = dest + ".part"
        with open(source, "rb") as src, gzip.open(partial, "wb", compresslevel=6) as out:
            shutil.copyfileobj(src, out, 1024 * 1024)
        os.replace(partial, dest)
        os.remove(source)


class _Routed(logging.Filter):
    """Passes the records ``layout`` sends to ``log_file``."""

    def __init__(self, layout: LogLayout, log_file: LogFile) -> None:
        super().__init__()
        self.layout, self.log_file = layout, log_file

    def filter(self, record: logging.LogRecord) -> bool:
        return self.layout.file_for(record.name) == self.log_file


@dataclass
class LogFiles:
    """The logging a process started; ``close`` writes out what is queued (it also runs at exit)."""

    settings: LogSettings
    layout: LogLayout
    handlers: list[logging.Handler]
    listener: logging.handlers.QueueListener | None = None

    def paths(self) -> list[str]:
        return [self.settings.path(f) for f in self.layout.files()]

    def close(self) -> None:
        root = logging.getLogger()
        for handler in self.handlers:
            root.removeHandler(handler)
        if self.listener is not None:
            self.listener.stop()
            for handler in self.listener.handlers:
                handler.close()
            self.listener = None
        for handler in self.handlers:
            handler.close()


_current: LogFiles | None = None


class HeldRecords(logging.Handler):
    """Records logged before the log files are known (while the config that names them is read): kept, then
    written where every later record goes (``start_logging(..., held)``), or to stderr when no files start."""

    def __init__(self) -> None:
        super().__init__(FILE_LEVEL)
        self.records: list[logging.LogRecord] = []
        root = logging.getLogger()
        root.addHandler(self)
        if root.getEffectiveLevel() > FILE_LEVEL:
            root.setLevel(FILE_LEVEL)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[logging.LogRecord]:
        logging.getLogger().removeHandler(self)
        records, self.records = self.records, []
        return records

    def to_stderr(self, level: int = logging.WARNING) -> None:
        """No log files after all (``-p``, a bad config): the records that matter go to stderr."""
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(logging.Formatter(LINE_FORMAT))
        for record in self.take():
            if record.levelno >= level:
                console.handle(record)


def _console(settings: LogSettings) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(settings.console_level.levelno)
    handler.setFormatter(logging.Formatter(LINE_FORMAT))
    return handler


def _file_handlers(settings: LogSettings, layout: LogLayout, *, rolling: bool) -> list[logging.Handler]:
    os.makedirs(settings.log_dir, exist_ok=True)
    handlers: list[logging.Handler] = []
    for log_file in layout.files():
        path = settings.path(log_file)
        handler: logging.Handler
        if rolling:
            handler = _RollingFile(path, settings.rolling(log_file))
        else:
            handler = logging.handlers.WatchedFileHandler(path, encoding="utf-8")
        handler.setLevel(FILE_LEVEL)
        handler.setFormatter(logging.Formatter(LINE_FORMAT))
        handler.addFilter(_Routed(layout, log_file))
        handlers.append(handler)
    return handlers


def _install(settings: LogSettings, layout: LogLayout, handlers: list[logging.Handler],
             listener: logging.handlers.QueueListener | None) -> LogFiles:
    global _current
    if _current is not None:  # a second call (an embedding process) replaces the first
        _current.close()
    root = logging.getLogger()
    root.setLevel(min(FILE_LEVEL, settings.console_level.levelno))
    for handler in handlers:
        root.addHandler(handler)
    _current = LogFiles(settings, layout, handlers, listener)
    atexit.register(_current.close)
    return _current


def start_logging(settings: LogSettings, layout: LogLayout, held: HeldRecords | None = None) -> LogFiles:
    """The process owns ``layout``'s files under ``settings.log_dir``: it writes and rolls them (from one thread),
    and copies records of ``settings.console_level`` and above to stderr; ``held`` records go first. OSError when
    the directory cannot be made (``held`` is then left as it was)."""
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = logging.handlers.QueueListener(records, *_file_handlers(settings, layout, rolling=True),
                                              respect_handler_level=True)
    listener.start()
    queued = logging.handlers.QueueHandler(records)
    queued.setLevel(FILE_LEVEL)
    files = _install(settings, layout, [_console(settings), queued], listener)
    for record in held.take() if held is not None else ():
        logging.getLogger(record.name).handle(record)
    return files


def follow_logging(settings: LogSettings, layout: LogLayout) -> LogFiles:
    """A helper process (the broker's dispatch process) appends to files another process owns and rolls: each line
    is written at once, and a file found renamed by a roll is opened again."""
    return _install(settings, layout, [_console(settings), *_file_handlers(settings, layout, rolling=False)], None)


def current_logging() -> tuple[LogSettings, LogLayout] | None:
    """What this process's ``start_logging`` set up (None without it): a child process passes it on to
    ``follow_logging`` so that its lines land in the same files."""
    return None if _current is None else (_current.settings, _current.layout)
