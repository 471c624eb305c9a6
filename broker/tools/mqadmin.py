"""``mqadmin``: RocketMQ's admin tool (tools/command/MQAdminStartup.java and its SubCommands) over MQAdminExt.

Command names, their single-letter and long options, and what they print follow the Java tool's printf formats, so
scripts written against Apache's ``mqadmin`` read ours. A command is found case-insensitively, as Java does;
``mqadmin`` alone or ``mqadmin help`` lists the commands, ``mqadmin help <command>`` shows a command's options in
commons-cli's layout. The NameServer comes from ``-n`` or the NAMESRV_ADDR variable.

Unlike Java (which prints a stack trace and exits 0), a failure prints one line to stderr and exits 1: an unknown
command, a bad or missing option (followed by the command's help), an unreachable NameServer or broker, or an
error answer.

Examples:
    $ mqadmin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t TopicTest
    $ mqadmin topicStatus -n 127.0.0.1:9876 -t TopicTest
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn, TextIO

from broker.common.errors import RmqError
from broker.tools import commands, ha_commands, messages, topic_commands
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, ShowHelp, UsageError

log = logging.getLogger(__name__)

HELP_WIDTH = 110  # ServerUtil: HelpFormatter.setWidth(110)


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

Runner = Callable[[MQAdminExt, CommandLine, TextIO], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SubCommand:
    name: str
    desc: str
    options: tuple[Option | OptionGroup, ...]
    run: Runner

    def all_options(self) -> list[Option]:
        """The standard options, then the command's; a command's own -n replaces the standard one (commons-cli's
        Options.addOption keeps the last option of a name)."""
        own = [o for item in self.options for o in (item.options if isinstance(item, OptionGroup) else [item])]
        keys = {o.key for o in own}
        return [o for o in STANDARD_OPTIONS if o.key not in keys] + own


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        missing = _NO_ARGUMENT.fullmatch(message)
        if missing:  # commons-cli's words for the same mistake
            raise UsageError(f"Missing argument for option: {missing[1] or missing[2]}")
        raise UsageError(message)


_NO_ARGUMENT = re.compile(r"argument (?:-(\w)/--\w+|--(\w+)): expected one argument")


def parse_command_line(cmd: SubCommand, argv: Sequence[str]) -> CommandLine:
    """DefaultParser.parse plus its checks: unknown options, required options and groups, one option per group."""
    parser = _Parser(prog=f"mqadmin {cmd.name}", add_help=False)
    for option in cmd.all_options():
        names = [f"-{option.short}"] if option.short else []
        names.append(f"--{option.long}")
        parser.add_argument(*names, dest=option.key, action="store" if option.has_arg else "store_true")
    values, extra = parser.parse_known_args(list(argv))
    unknown = [token for token in extra if token.startswith("-")]
    if unknown:
        raise UsageError(f"Unrecognized option: {unknown[0]}")
    line = CommandLine(vars(values))
    if line.has("h"):
        return line
    missing: list[str] = []
    for item in cmd.options:
        if isinstance(item, OptionGroup):
            given = [o for o in item.options if line.has(o.key)]
            if len(given) > 1:
                raise UsageError(f"The option '{given[1].key}' was specified but an option from this group has "
                                 f"already been selected: '{given[0].key}'")
            if not given:
                missing.append(str(item))
        elif item.required and not line.has(item.key):
            missing.append(item.key)
    if missing:
        raise UsageError(f"Missing required option{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    return line


def _find_wrap_pos(text: str, width: int, start: int = 0) -> int:
    """HelpFormatter.findWrapPos."""
    for mark in ("\n", "\t"):
        pos = text.find(mark, start)
        if pos != -1 and pos <= width:
            return pos + 1
    if start + width >= len(text):
        return -1
    pos = start + width
    while pos >= start and text[pos] not in " \n\r":
        pos -= 1
    if pos > start:
        return pos
    pos = start + width
    return -1 if pos == len(text) else pos


def _wrapped(text: str, width: int, next_line_tab_stop: int) -> str:
    """HelpFormatter.renderWrappedText."""
    pos = _find_wrap_pos(text, width)
    if pos == -1:
        return text.rstrip()
    lines = [text[:pos].rstrip()]
    tab = 1 if next_line_tab_stop >= width else next_line_tab_stop
    while True:
        text = " " * tab + text[pos:].strip()
        pos = _find_wrap_pos(text, width)
        if pos == -1:
            return "\n".join([*lines, text])
        if len(text) > width and pos == tab - 1:
            pos = width
        lines.append(text[:pos].rstrip())


def _sorted_options(options: list[Option]) -> list[Option]:
    return sorted(options, key=lambda o: o.key.lower())


def command_help(cmd: SubCommand) -> str:
    """HelpFormatter.printHelp("mqadmin <name>", options, true): the usage line, then one line per option."""
    groups = {o.key: item for item in cmd.options if isinstance(item, OptionGroup) for o in item.options}
    required = {item.key for item in cmd.options if isinstance(item, Option) and item.required}
    parts, done = [], set()
    for option in _sorted_options(cmd.all_options()):
        arg = " <arg>" if option.has_arg else ""
        group = groups.get(option.key)
        if group is None:
            parts.append(f"{option.flag()}{arg}" if option.key in required else f"[{option.flag()}{arg}]")
        elif id(group) not in done:
            done.add(id(group))
            parts.append(" | ".join(f"{o.flag()}{' <arg>' if o.has_arg else ''}"
                                    for o in _sorted_options(list(group.options))))
        else:
            parts.append("")
    usage = _wrapped(f"usage: mqadmin {cmd.name} " + " ".join(parts), HELP_WIDTH, len("usage: "))
    prefixes = []
    for option in _sorted_options(cmd.all_options()):
        prefix = f" -{option.short},--{option.long}" if option.short else f"    --{option.long}"
        prefixes.append((prefix + (" <arg>" if option.has_arg else ""), option.description))
    width = max(len(p) for p, _ in prefixes)
    rows = [_wrapped(f"{p:<{width}}   {d}", HELP_WIDTH, width + 3) for p, d in prefixes]
    return usage + "\n" + "\n".join(rows) + "\n"


# -- the command table ---------------------------------------------------------------------------------------------


def _o(short: str | None, long: str, description: str, *, arg: bool = True, required: bool = False) -> Option:
    return Option(short, long, arg, description, required)


CLUSTER_OR_LMQ = "Cluster name or lmq parent topic, lmq is used to find the route."

SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("updateTopic", "Update or create topic.", (
        OptionGroup((_o("b", "brokerAddr", "create topic to which broker"),
                     _o("c", "clusterName", "create topic to which cluster"))),
        _o("a", "attributes", "attribute(+a=b,+c=d,-e)"),
        _o("t", "topic", "topic name", required=True),
        _o("r", "readQueueNums", "set read queue nums"),
        _o("w", "writeQueueNums", "set write queue nums"),
        _o("p", "perm", "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]"),
        _o("o", "order", "set topic's order(true|false)"),
        _o("u", "unit", "is unit topic (true|false)"),
        _o("s", "hasUnitSub", "has unit sub (true|false)"),
    ), topic_commands.update_topic),
    SubCommand("deleteTopic", "Delete topic from broker and NameServer.", (
        _o("t", "topic", "topic name", required=True),
        _o("c", "clusterName", "delete topic from which cluster", required=True),
    ), topic_commands.delete_topic),
    SubCommand("updateSubGroup", "Update or create subscription group.", (
        _o("b", "brokerAddr", "create subscription group to which broker"),
        _o("c", "clusterName", "create subscription group to which cluster"),
        _o("g", "groupName", "consumer group name", required=True),
        _o("s", "consumeEnable", "consume enable"),
        _o("m", "consumeFromMinEnable", "from min offset"),
        _o("d", "consumeBroadcastEnable", "broadcast"),
        _o("o", "consumeMessageOrderly", "consume message orderly"),
        _o("q", "retryQueueNums", "retry queue nums"),
        _o("r", "retryMaxTimes", "retry max times"),
        _o("p", "groupRetryPolicy", "the json string of retry policy ( exp: "
           '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}} '
           '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}} )'),
        _o("i", "brokerId", "consumer from which broker id"),
        _o("w", "whichBrokerWhenConsumeSlowly", "which broker id when consume slowly"),
        _o("a", "notifyConsumerIdsChanged", "notify consumerId changed"),
        _o(None, "attributes", "attribute(+a=b,+c=d,-e)"),
    ), commands.update_sub_group),
    SubCommand("deleteSubGroup", "Delete subscription group from broker.", (
        _o("b", "brokerAddr", "delete subscription group from which broker"),
        _o("c", "clusterName", "delete subscription group from which cluster"),
        _o("g", "groupName", "subscription group name", required=True),
        _o("r", "removeOffset", "remove offset"),
    ), commands.delete_sub_group),
    SubCommand("topicRoute", "Examine topic route info.", (
        _o("t", "topic", "topic name", required=True),
        _o("l", "list", "Use list format to print data", arg=False),
    ), topic_commands.topic_route),
    SubCommand("topicStatus", "Examine topic Status info.", (
        _o("t", "topic", "topic name", required=True),
        _o("c", "cluster", "cluster name or lmq parent topic, lmq is used to find the route."),
    ), topic_commands.topic_status),
    SubCommand("topicClusterList", "Get cluster info for topic.", (
        _o("t", "topic", "topic name", required=True),
    ), topic_commands.topic_cluster_list),
    SubCommand("brokerStatus", "Fetch broker runtime status data.", (
        OptionGroup((_o("b", "brokerAddr", "Broker address"), _o("c", "clusterName", "which cluster"))),
    ), topic_commands.broker_status),
    SubCommand("deleteExpiredCommitLog", "Delete expired CommitLog files.", (
        _o("n", "namesrvAddr", "Name server address"),
        _o("b", "brokerAddr", "Broker address"),
        _o("c", "cluster", "clustername"),
    ), topic_commands.delete_expired_commit_log),
    SubCommand("queryMsgById", "Query Message by Id.", (
        _o("t", "topic", "topic name", required=True),
        _o("i", "msgId", "Message Id", required=True),
        _o("g", "consumerGroup", "consumer group name"),
        _o("d", "clientId", "The consumer's client id"),
        _o("s", "sendMessage", "resend message"),
        _o("u", "unitName", "unit name"),
        _o("f", "bodyFormat", "print message body by the specified format"),
        _o("c", "cluster", CLUSTER_OR_LMQ),
    ), messages.query_msg_by_id),
    SubCommand("queryMsgByKey", "Query Message by Key.", (
        _o("t", "topic", "Topic name", required=True),
        _o("k", "msgKey", "Message Key", required=True),
        _o("b", "beginTimestamp", "Begin timestamp(ms). default:0, eg:1676730526212"),
        _o("e", "endTimestamp", "End timestamp(ms). default:Long.MAX_VALUE, eg:1676730526212"),
        _o("m", "maxNum", "The maximum number of messages returned by the query, default:64"),
        _o("c", "cluster", CLUSTER_OR_LMQ),
        _o("p", "keyType", "Index key type, default index key type is K, you can use K for keys OR T for tags"),
        _o("l", "lastKey", "Last Key"),
    ), messages.query_msg_by_key),
    SubCommand("queryMsgByUniqueKey", "Query Message by Unique key.", (
        _o("i", "msgId", "Message Id", required=True),
        _o("g", "consumerGroup", "consumer group name"),
        _o("d", "clientId", "The consumer's client id"),
        _o("t", "topic", "The topic of msg", required=True),
        _o("a", "showAll", "Print all message, the limit is 32", arg=False),
        _o("c", "cluster", CLUSTER_OR_LMQ),
        _o("s", "startTime", "startTime"),
        _o("e", "endTime", "endTime"),
    ), messages.query_msg_by_unique_key),
    SubCommand("queryMsgByOffset", "Query Message by offset.", (
        _o("t", "topic", "topic name", required=True),
        _o("b", "brokerName", "Broker Name", required=True),
        _o("i", "queueId", "Queue Id", required=True),
        _o("o", "offset", "Queue Offset", required=True),
        _o("f", "bodyFormat", "print message body by the specified format"),
        _o("r", "routeTopic", "the topic which is used to find route info"),
    ), messages.query_msg_by_offset),
    SubCommand("producerConnection", "Query producer's socket connection and client version.", (
        _o("g", "producerGroup", "producer group name", required=True),
        _o("t", "topic", "topic name", required=True),
    ), commands.producer_connection),
    SubCommand("consumerConnection", "Query consumer's socket connection, client version and subscription.", (
        _o("g", "consumerGroup", "consumer group name", required=True),
        _o("b", "brokerAddr", "broker address"),
    ), commands.consumer_connection),
    SubCommand("consumerProgress", "Query consumer's progress, speed.", (
        _o("g", "groupName", "consumer group name"),
        _o("t", "topicName", "topic name"),
        _o("s", "showClientIP", "Show Client IP per Queue"),
        _o("c", "cluster", CLUSTER_OR_LMQ),
    ), commands.consumer_progress),
    SubCommand("clusterList", "List cluster infos.", (
        _o("m", "moreStats", "Print more stats", arg=False),
        _o("i", "interval", "specify intervals numbers, it is in seconds"),
        _o("c", "clusterName", "which cluster"),
    ), topic_commands.cluster_list),
    SubCommand("haStatus", "Fetch ha runtime status data.", (
        _o("c", "clusterName", "which cluster"),
        _o("b", "brokerAddr", "which broker to fetch"),
        _o("i", "interval", "the interval(second) of get info"),
    ), ha_commands.ha_status),
    SubCommand("topicList", "Fetch all topic list from name server.", (
        _o("c", "clusterModel", "clusterModel", arg=False),
    ), topic_commands.topic_list),
    SubCommand("resetOffsetByTime", "Reset consumer offset by timestamp(without client restart).", (
        _o("g", "group", "set the consumer group", required=True),
        _o("t", "topic", "set the topic", required=True),
        _o("s", "timestamp", "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]", required=True),
        _o("f", "force", "set the force rollback by timestamp switch[true|false]. Deprecated."),
        _o("b", "broker", "broker addr"),
        _o("q", "queue", "queue id"),
        _o("o", "offset", "Expect queue offset, not support old version broker"),
        _o("c", "cluster", CLUSTER_OR_LMQ),
    ), commands.reset_offset_by_time),
)


def find_sub_command(name: str) -> SubCommand | None:
    """MQAdminStartup.findSubCommand: names match ignoring case."""
    return next((cmd for cmd in SUB_COMMANDS if cmd.name.lower() == name.lower()), None)


def commands_help() -> str:
    lines = ["The most commonly used mqadmin commands are:"]
    lines += [f"   {cmd.name:<35} {cmd.desc}" for cmd in SUB_COMMANDS]
    lines += ["", "See 'mqadmin help <command>' for more information on a specific command."]
    return "\n".join(lines) + "\n"


# -- entry point ---------------------------------------------------------------------------------------------------


async def run_command(cmd: SubCommand, line: CommandLine, out: TextIO) -> None:
    async with MQAdminExt(line.value("n")) as admin:
        await cmd.run(admin, line, out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``mqadmin <command> [options]``; returns the exit code (0 success, 1 failure)."""
    args = list(sys.argv[1:] if argv is None else argv)
    out, err = out or sys.stdout, err or sys.stderr
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s - %(message)s")
    if not args or (len(args) == 1 and args[0] == "help"):
        out.write(commands_help())
        return 0
    if args[0] == "help":
        cmd = find_sub_command(args[1])
        if cmd is None:
            err.write(f"The sub command {args[1]} not exist.\n")
            return 1
        out.write(command_help(cmd))
        return 0
    cmd = find_sub_command(args[0])
    if cmd is None:
        err.write(f"The sub command {args[0]} not exist.\n")
        out.write(commands_help())
        return 1
    try:
        line = parse_command_line(cmd, args[1:])
    except UsageError as e:
        err.write(f"{e}\n")
        out.write(command_help(cmd))
        return 1
    if line.has("h"):
        out.write(command_help(cmd))
        return 0
    return _execute(cmd, line, out, err)


def _execute(cmd: SubCommand, line: CommandLine, out: TextIO, err: TextIO) -> int:
    try:
        asyncio.run(run_command(cmd, line, out))
        out.flush()
    except BrokenPipeError:  # the reader went away (mqadmin ... | head): stop quietly
        _silence(out)
        return 0
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except ShowHelp:
        out.write(command_help(cmd))
        return 0
    except UsageError as e:
        err.write(f"{e}\n")
        out.write(command_help(cmd))
        return 1
    except (RmqError, OSError, ValueError) as e:
        err.write(f"{cmd.name} command failed: {e}\n")
        return 1
    except Exception as e:  # a CLI never ends in a traceback; the log keeps it for debugging
        log.debug("%s failed", cmd.name, exc_info=True)
        err.write(f"{cmd.name} command failed: {type(e).__name__}: {e}\n")
        return 1
    return 0


def _silence(out: TextIO) -> None:
    """Point a closed stdout at /dev/null, so the interpreter's final flush does not complain about the pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


if __name__ == "__main__":
    sys.exit(main())
