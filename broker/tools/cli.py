"""What every ``mqadmin`` command shares: how it declares its options (commons-cli's Option and OptionGroup, in a
SubCommand), its parsed options (CommandLine), the two signals it may raise (UsageError, ShowHelp), and Java's text
forms the commands print with.

Each command module declares its commands (``SUB_COMMANDS``: name, description, options, runner) beside the runners;
``mqadmin`` puts the tables together.

Java's ``String.valueOf`` shows through where Java prints a null ("null") or a boolean ("true"), and maps print as
Java's HashMap does ("{0=127.0.0.1:10911}", in HashMap order).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any, TextIO

from broker.client.route import MASTER_ID
from broker.common.errors import RmqError
from broker.common.hash_order import hash_map_order
from broker.tools.admin_client import CLUSTER_NOT_FOUND

if TYPE_CHECKING:
    from broker.tools.admin import MQAdminExt


class UsageError(RmqError):
    """A command line the command cannot run; the message is commons-cli's (or says which option is wrong)."""


class ShowHelp(Exception):  # noqa: N818 - a signal, not an error
    """The options given select nothing to do (updateSubGroup without -b or -c): print the command's help."""


class CommandLine:
    """The parsed options of one command (commons-cli's CommandLine): ``has("t")``, ``value("t")`` (trimmed)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def has(self, key: str) -> bool:
        return self._values.get(key) not in (None, False)

    def value(self, key: str, default: str | None = None) -> str | None:
        raw = self._values.get(key)
        return raw.strip() if isinstance(raw, str) else default

    def required(self, key: str) -> str:
        raw = self.value(key)
        if raw is None:
            raise UsageError(f"Missing required option: {key}")
        return raw

    def int_value(self, key: str, default: int) -> int:
        raw = self.value(key)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"option {key}: {raw!r} is not a number") from None

    def bool_value(self, key: str, default: bool) -> bool:
        """Boolean.parseBoolean: "true" in any case is true, anything else false."""
        raw = self.value(key)
        return default if raw is None else raw.lower() == "true"


# -- options (commons-cli's model: an Option, a required OptionGroup, the HelpFormatter layout) ------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """One option: ``-t,--topic <arg>``. ``short`` is None for a long-only option (updateSubGroup --attributes)."""

    short: str | None
    long: str
    has_arg: bool
    description: str
    required: bool = False

    @property
    def key(self) -> str:
        return self.short or self.long

    def flag(self) -> str:
        return f"-{self.short}" if self.short else f"--{self.long}"


@dataclass(frozen=True, slots=True)
class OptionGroup:
    """Exactly one of ``options`` must be given (an OptionGroup with setRequired(true))."""

    options: tuple[Option, ...]

    def __str__(self) -> str:
        return "[" + ", ".join(f"{o.flag()} {o.description}" for o in self.options) + "]"


STANDARD_OPTIONS = (
    Option("h", "help", False, "Print help"),
    Option("n", "namesrvAddr", True, "Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'"),
)

Runner = Callable[["MQAdminExt", "CommandLine", TextIO], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SubCommand:
    name: str
    desc: str
    options: tuple[Option | OptionGroup, ...]
    run: Runner
    alias: str | None = None  # SubCommand.commandAlias: another name it is found by (deleteAccessConfig)

    def all_options(self) -> list[Option]:
        """The standard options, then the command's; a command's own -n replaces the standard one (commons-cli's
        Options.addOption keeps the last option of a name)."""
        own = [o for item in self.options for o in (item.options if isinstance(item, OptionGroup) else [item])]
        keys = {o.key for o in own}
        return [o for o in STANDARD_OPTIONS if o.key not in keys] + own

def opt(short: str | None, long: str, description: str, *, arg: bool = True, required: bool = False) -> Option:
    """``new Option(short, long, hasArg, description)`` with ``setRequired(required)``."""
    return Option(short, long, arg, description, required)


# -- CommandUtil: the brokers of a cluster -----------------------------------------------------------------------------


async def cluster_addrs(admin: MQAdminExt, cluster: str, out: TextIO, *, slaves: bool = False) -> list[str]:
    """CommandUtil.fetchMasterAddrByClusterName (``slaves``: fetchMasterAndSlaveAddrByClusterName): the addresses in
    the order of Java's HashSet; an unknown cluster prints Java's "[error]" line (without a newline) and has none."""
    info = await admin.examine_broker_cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        out.write(f"[error] {CLUSTER_NOT_FOUND}")
        return []
    brokers = [info.broker_addr_table[n] for n in names if n in info.broker_addr_table]
    addrs = [a for b in brokers for a in (b.broker_addrs.values() if slaves else [b.broker_addrs.get(MASTER_ID)])]
    return hash_map_order(list(dict.fromkeys(a for a in addrs if a is not None)))


# -- Java's text forms -------------------------------------------------------------------------------------------------


def js(value: object) -> str:
    """String.valueOf."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def java_map(mapping: Mapping[Any, Any], capacity: int = 16) -> str:
    """HashMap.toString, entries in HashMap order."""
    return "{" + ", ".join(f"{k}={js(mapping[k])}" for k in hash_map_order(list(mapping), capacity)) + "}"


def java_fixed(value: float, digits: int = 2) -> str:
    """String.format("%.2f", value): Java rounds the shortest decimal form of the double half up, so 0.125 prints
    "0.13" where Python's format rounds it to even, "0.12"."""
    return str(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def human_time2(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: local time with milliseconds after a comma."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def format_date(ms: int) -> str:
    """UtilAll.formatDate(date, "yyyy-MM-dd HH:mm:ss")."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def front(text: str | None, size: int) -> str:
    """UtilAll.frontStringAtLeast: at most ``size`` characters."""
    return js(text)[:size]
