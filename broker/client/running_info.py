"""ConsumerRunningInfo: a consumer's answer to GET_CONSUMER_RUNNING_INFO, which a broker passes on from ``mqadmin
consumerStatus`` (or MQAdminExt.get_consumer_running_info) to the client holding the connection.

Rule 1: the body's JSON shape (remoting/protocol/body/ConsumerRunningInfo.java and ProcessQueueInfo.java, as fastjson
writes them: fields in name order, MessageQueue map keys as objects) and the answer of the client
(ClientRemotingProcessor.getConsumerRunningInfo, MQClientInstance.consumerRunningInfo) are written here once. Each
consumer supplies what it knows: its settings as Java's field names (MixAll.object2Properties), its subscriptions,
and the queues it holds with their committed offsets and what is cached of them.

rmq's client keeps no ConsumerStatsManager: ``statusTable`` (pull and consume RT and TPS per topic) stays empty rather
than invented. ``jstack`` (asked with jstackEnable) lists Python's threads and this client's asyncio tasks in
UtilAll.jstack's layout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from enum import Enum
from types import FrameType
from typing import TYPE_CHECKING, Any

from broker.client.message import MessageQueue
from broker.client.offsets import OrderlyProcessQueue, ProcessQueue
from broker.client.protocol import SubscriptionData
from broker.common.fastjson import encode_json
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.headers import GetConsumerRunningInfoRequestHeader

if TYPE_CHECKING:
    from broker.client.instance import ConsumerInner

PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"
CLIENT_VERSION_DESC = "V5_5_1"  # MQVersion.getVersionDesc of the version our requests carry (REMOTING_VERSION)
# Settings whose Java field name is not the camelCase of ours.
JAVA_FIELD_NAMES = {"allocate_strategy": "allocateMessageQueueStrategy", "client_ip": "clientIP"}
JSTACK_NAME_WIDTH = 40


def _java_text(value: object) -> str:
    """String.valueOf as Java prints a setting: booleans in lower case, enums by name, a strategy by its name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, str | int | float):
        return str(value)
    return str(getattr(value, "name", type(value).__name__))


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def consumer_properties(group: str, *configs: object) -> dict[str, str]:
    """MixAll.object2Properties of a consumer: its group and each setting of the ``configs`` dataclasses under Java's
    field name (a setting that is None is left out, as Java leaves out a null field)."""
    properties = {"consumerGroup": group}
    for config in configs:
        for f in dataclasses.fields(config):  # type: ignore[arg-type]
            value = getattr(config, f.name)
            if value is not None:
                properties[JAVA_FIELD_NAMES.get(f.name, _camel(f.name))] = _java_text(value)
    return properties


def _epoch_ms(monotonic_s: float) -> int:
    """A time.monotonic() reading as epoch milliseconds (0 stays 0: never)."""
    return int((time.time() - (time.monotonic() - monotonic_s)) * 1000) if monotonic_s else 0


def process_queue_info(pq: ProcessQueue, commit_offset: int) -> dict[str, Any]:
    """ProcessQueueInfo (ProcessQueue.fillProcessQueueInfo): what is cached of a queue, and for an orderly queue what
    the listener has taken and not finished (Java's transactionMsg fields). rmq counts no unlock retries."""
    cached, taken = pq.cached_offsets(), []
    locked, last_lock = False, 0
    if isinstance(pq, OrderlyProcessQueue):
        taken = pq.taken_offsets()
        locked, last_lock = pq.locked, _epoch_ms(pq.last_lock_timestamp)
    return {
        "cachedMsgCount": len(cached),
        "cachedMsgMaxOffset": cached[-1] if cached else 0,
        "cachedMsgMinOffset": cached[0] if cached else 0,
        "cachedMsgSizeInMiB": pq.msg_size // (1024 * 1024),
        "commitOffset": commit_offset,
        "droped": pq.dropped,
        "lastConsumeTimestamp": pq.last_consume_timestamp,
        "lastLockTimestamp": last_lock,
        "lastPullTimestamp": pq.last_pull_timestamp,
        "locked": locked,
        "transactionMsgCount": len(taken),
        "transactionMsgMaxOffset": taken[-1] if taken else 0,
        "transactionMsgMinOffset": taken[0] if taken else 0,
        "tryUnlockTimes": 0,
    }


def consumer_running_info(properties: Mapping[str, str], subscriptions: Iterable[SubscriptionData],
                          mq_table: Mapping[MessageQueue, dict[str, Any]]) -> dict[str, Any]:
    """The ConsumerRunningInfo body of one consumer: TreeSet and TreeMap order (SubscriptionData sorts by
    "topic@subString", MessageQueue by topic, broker name, queue id)."""
    return {
        "jstack": None,
        "mqPopTable": {},
        "mqTable": dict(sorted(mq_table.items())),
        "properties": dict(properties),
        "statusTable": {},
        "subscriptionSet": [s.to_json() for s in sorted(subscriptions, key=lambda s: f"{s.topic}@{s.sub_string}")],
        "userConsumerInfo": {},
    }


async def serve_get_consumer_running_info(consumers: Mapping[str, ConsumerInner], namesrv_addrs: Iterable[str],
                                          request: RemotingCommand) -> RemotingCommand:
    """ClientRemotingProcessor.getConsumerRunningInfo: the running info of the group's consumer in this client, the
    client-wide properties added; SYSTEM_ERROR when the client has no consumer of that group."""
    header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
    consumer = consumers.get(header.consumer_group)
    if consumer is None:
        return create_response(request, ResponseCode.SYSTEM_ERROR,
                               f"The Consumer Group <{header.consumer_group}> not exist in this consumer")
    info = await consumer.consumer_running_info()
    info["properties"] |= {PROP_NAMESERVER_ADDR: "".join(f"{addr};" for addr in namesrv_addrs),
                           PROP_CONSUME_TYPE: consumer.consume_type, PROP_CLIENT_VERSION: CLIENT_VERSION_DESC}
    if header.jstack_enable:
        info["jstack"] = jstack()
    return create_response(request, ResponseCode.SUCCESS, body=encode_json(info).encode())


# -- jstack ------------------------------------------------------------------------------------------------------------


def _frame_text(frame: FrameType) -> str:
    """A frame as a Java StackTraceElement prints: ``function(file:line)``."""
    code = frame.f_code
    return f"{code.co_qualname}({os.path.basename(code.co_filename)}:{frame.f_lineno})"


def _thread_stack(frame: FrameType | None) -> list[FrameType]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames  # innermost first, as Java


def _task_stack(task: asyncio.Task[Any]) -> list[FrameType]:
    """The coroutines a task is suspended in, following what each one awaits (Task.get_stack gives only the
    outermost frame of a suspended coroutine)."""
    frames = []
    coro: Any = task.get_coro()
    while coro is not None and getattr(coro, "cr_frame", None) is not None:
        frames.append(coro.cr_frame)
        coro = coro.cr_await
    return frames[::-1]


def _section(name: str, ident: object, state: str, frames: list[FrameType]) -> list[str]:
    head = f"{name:<{JSTACK_NAME_WIDTH}}TID: {ident} STATE: {state}"
    return [head, *(f"{name:<{JSTACK_NAME_WIDTH}}{_frame_text(f)}" for f in frames), ""]


def jstack() -> str:
    """UtilAll.jstack for Python: each live thread's stack, then each pending asyncio task's of the running loop."""
    lines: list[str] = []
    current = sys._current_frames()
    for thread in threading.enumerate():
        frames = _thread_stack(current.get(thread.ident or 0))
        if frames:
            lines += _section(thread.name, thread.ident, "ALIVE", frames)
    for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
        frames = _task_stack(task)
        if frames:
            lines += _section(task.get_name(), id(task), "PENDING", frames)
    return "\n".join(lines) + "\n" if lines else ""
