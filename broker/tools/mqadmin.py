"""``mqadmin``: RocketMQ's admin tool (tools/command/MQAdminStartup.java and its SubCommands) over MQAdminExt.

Command names, their single-letter and long options, and what they print follow the Java tool's printf formats, so
scripts written against Apache's ``mqadmin`` read ours. A command is found case-insensitively, as Java does;
``mqadmin`` alone or ``mqadmin help`` lists the commands, ``mqadmin help <command>`` shows a command's options in
commons-cli's layout. The NameServer comes from ``-n`` or the NAMESRV_ADDR variable. Requests are signed with the
keys of ``conf/tools.yml`` under the RocketMQ home (``-Drocketmq.home.dir=DIR`` before the command, or ROCKETMQ_HOME),
as Apache's tool does, when that file has them (``auth_commands``).

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
from collections.abc import Mapping, Sequence
from typing import NoReturn, TextIO

from broker.common.errors import RmqError
from broker.tools import (
    acl_v1_commands,
    auth_commands,
    broker_commands,
    commands,
    ha_commands,
    message_commands,
    messages,
    namesrv_commands,
    stats_commands,
    topic_commands,
)
from broker.tools.admin import MQAdminExt
from broker.tools.cli import (
    CommandLine,
    Option,
    OptionGroup,
    ShowHelp,
    SubCommand,
    UsageError,
    opt,
)

log = logging.getLogger(__name__)

HELP_WIDTH = 110  # ServerUtil: HelpFormatter.setWidth(110)


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


# -- the command table (the later commands are declared in their modules, by concept) ------------------------------


CLUSTER_OR_LMQ = "Cluster name or lmq parent topic, lmq is used to find the route."

SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("updateTopic", "Update or create topic.", (
        OptionGroup((opt("b", "brokerAddr", "create topic to which broker"),
                     opt("c", "clusterName", "create topic to which cluster"))),
        opt("a", "attributes", "attribute(+a=b,+c=d,-e)"),
        opt("t", "topic", "topic name", required=True),
        opt("r", "readQueueNums", "set read queue nums"),
        opt("w", "writeQueueNums", "set write queue nums"),
        opt("p", "perm", "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]"),
        opt("o", "order", "set topic's order(true|false)"),
        opt("u", "unit", "is unit topic (true|false)"),
        opt("s", "hasUnitSub", "has unit sub (true|false)"),
    ), topic_commands.update_topic),
    SubCommand("deleteTopic", "Delete topic from broker and NameServer.", (
        opt("t", "topic", "topic name", required=True),
        opt("c", "clusterName", "delete topic from which cluster", required=True),
    ), topic_commands.delete_topic),
    SubCommand("updateSubGroup", "Update or create subscription group.", (
        opt("b", "brokerAddr", "create subscription group to which broker"),
        opt("c", "clusterName", "create subscription group to which cluster"),
        opt("g", "groupName", "consumer group name", required=True),
        opt("s", "consumeEnable", "consume enable"),
        opt("m", "consumeFromMinEnable", "from min offset"),
        opt("d", "consumeBroadcastEnable", "broadcast"),
        opt("o", "consumeMessageOrderly", "consume message orderly"),
        opt("q", "retryQueueNums", "retry queue nums"),
        opt("r", "retryMaxTimes", "retry max times"),
        opt("p", "groupRetryPolicy", "the json string of retry policy ( exp: "
           '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}} '
           '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}} )'),
        opt("i", "brokerId", "consumer from which broker id"),
        opt("w", "whichBrokerWhenConsumeSlowly", "which broker id when consume slowly"),
        opt("a", "notifyConsumerIdsChanged", "notify consumerId changed"),
        opt(None, "attributes", "attribute(+a=b,+c=d,-e)"),
    ), commands.update_sub_group),
    SubCommand("deleteSubGroup", "Delete subscription group from broker.", (
        opt("b", "brokerAddr", "delete subscription group from which broker"),
        opt("c", "clusterName", "delete subscription group from which cluster"),
        opt("g", "groupName", "subscription group name", required=True),
        opt("r", "removeOffset", "remove offset"),
    ), commands.delete_sub_group),
    SubCommand("topicRoute", "Examine topic route info.", (
        opt("t", "topic", "topic name", required=True),
        opt("l", "list", "Use list format to print data", arg=False),
    ), topic_commands.topic_route),
    SubCommand("topicStatus", "Examine topic Status info.", (
        opt("t", "topic", "topic name", required=True),
        opt("c", "cluster", "cluster name or lmq parent topic, lmq is used to find the route."),
    ), topic_commands.topic_status),
    SubCommand("topicClusterList", "Get cluster info for topic.", (
        opt("t", "topic", "topic name", required=True),
    ), topic_commands.topic_cluster_list),
    SubCommand("brokerStatus", "Fetch broker runtime status data.", (
        OptionGroup((opt("b", "brokerAddr", "Broker address"), opt("c", "clusterName", "which cluster"))),
    ), topic_commands.broker_status),
    SubCommand("deleteExpiredCommitLog", "Delete expired CommitLog files.", (
        opt("n", "namesrvAddr", "Name server address"),
        opt("b", "brokerAddr", "Broker address"),
        opt("c", "cluster", "clustername"),
    ), topic_commands.delete_expired_commit_log),
    SubCommand("queryMsgById", "Query Message by Id.", (
        opt("t", "topic", "topic name", required=True),
        opt("i", "msgId", "Message Id", required=True),
        opt("g", "consumerGroup", "consumer group name"),
        opt("d", "clientId", "The consumer's client id"),
        opt("s", "sendMessage", "resend message"),
        opt("u", "unitName", "unit name"),
        opt("f", "bodyFormat", "print message body by the specified format"),
        opt("c", "cluster", CLUSTER_OR_LMQ),
    ), messages.query_msg_by_id),
    SubCommand("queryMsgByKey", "Query Message by Key.", (
        opt("t", "topic", "Topic name", required=True),
        opt("k", "msgKey", "Message Key", required=True),
        opt("b", "beginTimestamp", "Begin timestamp(ms). default:0, eg:1676730526212"),
        opt("e", "endTimestamp", "End timestamp(ms). default:Long.MAX_VALUE, eg:1676730526212"),
        opt("m", "maxNum", "The maximum number of messages returned by the query, default:64"),
        opt("c", "cluster", CLUSTER_OR_LMQ),
        opt("p", "keyType", "Index key type, default index key type is K, you can use K for keys OR T for tags"),
        opt("l", "lastKey", "Last Key"),
    ), messages.query_msg_by_key),
    SubCommand("queryMsgByUniqueKey", "Query Message by Unique key.", (
        opt("i", "msgId", "Message Id", required=True),
        opt("g", "consumerGroup", "consumer group name"),
        opt("d", "clientId", "The consumer's client id"),
        opt("t", "topic", "The topic of msg", required=True),
        opt("a", "showAll", "Print all message, the limit is 32", arg=False),
        opt("c", "cluster", CLUSTER_OR_LMQ),
        opt("s", "startTime", "startTime"),
        opt("e", "endTime", "endTime"),
    ), messages.query_msg_by_unique_key),
    SubCommand("queryMsgByOffset", "Query Message by offset.", (
        opt("t", "topic", "topic name", required=True),
        opt("b", "brokerName", "Broker Name", required=True),
        opt("i", "queueId", "Queue Id", required=True),
        opt("o", "offset", "Queue Offset", required=True),
        opt("f", "bodyFormat", "print message body by the specified format"),
        opt("r", "routeTopic", "the topic which is used to find route info"),
    ), messages.query_msg_by_offset),
    SubCommand("queryMsgTraceById", "Query a message trace.", (
        opt("i", "msgId", "Message Id", required=True),
        opt("t", "traceTopic", "The name value of message trace topic"),
        opt("b", "beginTimestamp", "Begin timestamp(ms). default:0, eg:1676730526212"),
        opt("e", "endTimestamp", "End timestamp(ms). default:Long.MAX_VALUE, eg:1676730526212"),
        opt("c", "maxNum", "The maximum number of messages returned by the query, default:64"),
    ), messages.query_msg_trace_by_id),
    SubCommand("producerConnection", "Query producer's socket connection and client version.", (
        opt("g", "producerGroup", "producer group name", required=True),
        opt("t", "topic", "topic name", required=True),
    ), commands.producer_connection),
    SubCommand("consumerConnection", "Query consumer's socket connection, client version and subscription.", (
        opt("g", "consumerGroup", "consumer group name", required=True),
        opt("b", "brokerAddr", "broker address"),
    ), commands.consumer_connection),
    SubCommand("consumerProgress", "Query consumer's progress, speed.", (
        opt("g", "groupName", "consumer group name"),
        opt("t", "topicName", "topic name"),
        opt("s", "showClientIP", "Show Client IP per Queue"),
        opt("c", "cluster", CLUSTER_OR_LMQ),
    ), commands.consumer_progress),
    SubCommand("clusterList", "List cluster infos.", (
        opt("m", "moreStats", "Print more stats", arg=False),
        opt("i", "interval", "specify intervals numbers, it is in seconds"),
        opt("c", "clusterName", "which cluster"),
    ), topic_commands.cluster_list),
    SubCommand("haStatus", "Fetch ha runtime status data.", (
        opt("c", "clusterName", "which cluster"),
        opt("b", "brokerAddr", "which broker to fetch"),
        opt("i", "interval", "the interval(second) of get info"),
    ), ha_commands.ha_status),
    SubCommand("topicList", "Fetch all topic list from name server.", (
        opt("c", "clusterModel", "clusterModel", arg=False),
    ), topic_commands.topic_list),
    SubCommand("resetOffsetByTime", "Reset consumer offset by timestamp(without client restart).", (
        opt("g", "group", "set the consumer group", required=True),
        opt("t", "topic", "set the topic", required=True),
        opt("s", "timestamp", "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]", required=True),
        opt("f", "force", "set the force rollback by timestamp switch[true|false]. Deprecated."),
        opt("b", "broker", "broker addr"),
        opt("q", "queue", "queue id"),
        opt("o", "offset", "Expect queue offset, not support old version broker"),
        opt("c", "cluster", CLUSTER_OR_LMQ),
    ), commands.reset_offset_by_time),
    *broker_commands.SUB_COMMANDS,
    *namesrv_commands.SUB_COMMANDS,
    *message_commands.SUB_COMMANDS,
    *stats_commands.SUB_COMMANDS,
    *auth_commands.SUB_COMMANDS,
    *acl_v1_commands.SUB_COMMANDS,
)


def find_sub_command(name: str) -> SubCommand | None:
    """MQAdminStartup.findSubCommand: a name or an alias, ignoring case."""
    wanted = name.lower()
    return next((cmd for cmd in SUB_COMMANDS
                 if cmd.name.lower() == wanted or (cmd.alias is not None and cmd.alias.lower() == wanted)), None)


def commands_help() -> str:
    lines = ["The most commonly used mqadmin commands are:"]
    lines += [f"   {cmd.name:<35} {cmd.desc}" for cmd in SUB_COMMANDS]
    lines += ["", "See 'mqadmin help <command>' for more information on a specific command."]
    return "\n".join(lines) + "\n"


# -- entry point ---------------------------------------------------------------------------------------------------


async def run_command(cmd: SubCommand, line: CommandLine, out: TextIO,
                      properties: Mapping[str, str] | None = None) -> None:
    """``cmd`` on an MQAdminExt signed with the keys of tools.yml under the RocketMQ home, if there are any."""
    credentials = auth_commands.tools_credentials(auth_commands.tools_home(properties or {}))
    async with MQAdminExt(line.value("n"), credentials=credentials) as admin:
        await cmd.run(admin, line, out)


def system_properties(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """The leading ``-Dkey=value`` arguments (Java's system properties, which Apache's script passes the JVM: here
    only ``rocketmq.home.dir`` is read), and the rest."""
    properties: dict[str, str] = {}
    while args and args[0].startswith("-D"):
        key, _, value = args[0][2:].partition("=")
        properties[key] = value
        args = args[1:]
    return properties, args


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``mqadmin <command> [options]``; returns the exit code (0 success, 1 failure)."""
    properties, args = system_properties(list(sys.argv[1:] if argv is None else argv))
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
    return _execute(cmd, line, out, err, properties)


def _execute(cmd: SubCommand, line: CommandLine, out: TextIO, err: TextIO, properties: Mapping[str, str]) -> int:
    try:
        asyncio.run(run_command(cmd, line, out, properties))
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
