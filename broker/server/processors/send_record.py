"""A single send of the common shape, from its header's extFields straight to its CommitLog record in one call:
SendMessageProcessor's fast path (``_speedups.send_record`` in C; Python twin ``_send_record_py``).

The general path (send.py) parses the header into a dataclass, runs msgCheck, decodes the properties into a dict,
adds the broker's, orders them as Java's HashMap does, builds a StoreMessage, and the put encodes it: most of a
single send's own work on the broker's one loop thread. A send taken here is stored as the same record and answered
the same; any other takes the general path, which also names what is wrong: a topic that does not exist yet, is a
retry topic, compacted, or not sendable; a batch, a transaction, DELAY, POP_CK, no UNIQ_KEY; a field missing or not
a plain decimal; a property name that is not ASCII; a limit passed. Without the C extension every send takes the
general path (in Python this one would cost what it saves).

Examples:
    >>> sends = SingleSends(broker_config, store_config, topics, store_host, "DefaultRegion", "true")  # doctest: +SKIP
    >>> ready = sends.record_of(conn.remote_address, request)  # None: the general path  # doctest: +SKIP
    >>> topic, record, queue_id, uniq_key = ready  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.common import validation as v
from broker.common.message import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MSG_REGION,
    PROPERTY_POP_CK,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_MASK,
    SysFlag,
    decode_properties,
    pack_host,
    parse_host,
)
from broker.common.topic import TopicConfig, TopicFilterType, is_writeable
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader
from broker.server.message_properties import PROPERTIES_MAP_CAPACITY, java_ordered
from broker.store.commit_log import MAX_TOPIC_FIELD_LENGTH, RECORD_HEADROOM, StoreMessage, encode_ahead
from broker.store.results import AppendMessageResult

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig
    from broker.server.metadata.topics import TopicConfigManager
    from broker.store.config import MessageStoreConfig

# The header fields send_record reads, in the order of its names tuple; the first eight are required.
SEND_RECORD_FIELDS = ("producer_group", "topic", "default_topic", "default_topic_queue_nums", "queue_id", "sys_flag",
                      "born_timestamp", "flag", "properties", "reconsume_times", "max_reconsume_times", "batch")
_REQUIRED = 8
MAX_PROPERTIES = 64  # properties of a message (the producer's and the broker's) this path takes: C's MAX_ENTRIES
_GENERAL_NAMES = frozenset({PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TRANSACTION_PREPARED, PROPERTY_POP_CK})
_DECIMAL = re.compile(r"-?[0-9]{1,18}")
_INT32_MIN, _INT32_MAX, _INT64_MIN, _INT64_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1
_MULTI_TAGS = int(SysFlag.MULTI_TAGS)
TOPICS_MAX = 65_536  # topics remembered as taken or not (forgotten all at once when full)


def send_record_names(wire: dict[str, str] | None) -> tuple[str, ...]:
    """The extFields keys of SEND_RECORD_FIELDS under a code's wire names (SEND_MESSAGE_V2's one-letter ones)."""
    names = SendMessageRequestHeader.wire_names(wire)
    return tuple(names[name] for name in SEND_RECORD_FIELDS)


@functools.lru_cache(maxsize=4096)
def born_host(remote_address: str) -> bytes:
    """The packed address of a producer connection (an IPv4-mapped IPv6 peer is stored as IPv4, as Java sees it)."""
    try:
        host, port = parse_host(remote_address)
        addr = ipaddress.ip_address(host)
    except ValueError:
        return pack_host("127.0.0.1", 0)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return pack_host(str(addr), port)


def _decimal(text: str | None, low: int, high: int) -> int | None:
    """``int(text)`` when ``text`` is a plain decimal within [low, high] (what C reads), else None."""
    if text is None or not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def _utf8(text: str) -> bytes | None:
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return None


def _send_record_py(ext: Mapping[str, str], names: tuple[str, ...], body: bytes, queue_limit: int, sys_flag_bits: int,
                    born_host: bytes, store_host: bytes, region: str, trace_on: str, cluster: str, max_body: int,
                    max_record: int, map_capacity: int) -> tuple[bytearray, int, str] | None:
    """The Python twin of ``_speedups.send_record``: for a send of the common shape the record the general path
    stores (send.py's properties in java_ordered order, ``encode_ahead`` of its StoreMessage), its queue id and
    UNIQ_KEY; None for any other."""
    if type(ext) is not dict:
        return None
    fields = dict(zip(SEND_RECORD_FIELDS, (ext.get(name) for name in names), strict=True))
    if any(fields[name] is None for name in SEND_RECORD_FIELDS[:_REQUIRED]) or any(
            value is not None and not isinstance(value, str) for value in fields.values()):
        return None
    queue_id = _decimal(fields["queue_id"], 0, queue_limit - 1)
    sys_flag = _decimal(fields["sys_flag"], 0, _INT32_MAX)
    born_timestamp = _decimal(fields["born_timestamp"], _INT64_MIN, _INT64_MAX)
    flag = _decimal(fields["flag"], _INT32_MIN, _INT32_MAX)
    reconsume = fields["reconsume_times"]
    reconsume_times = 0 if reconsume is None else _decimal(reconsume, _INT32_MIN, _INT32_MAX)
    batch, retries = fields["batch"], fields["max_reconsume_times"]
    if (None in (queue_id, sys_flag, born_timestamp, flag, reconsume_times)
            or _decimal(fields["default_topic_queue_nums"], _INT64_MIN, _INT64_MAX) is None
            or (retries is not None and _decimal(retries, _INT64_MIN, _INT64_MAX) is None)
            or sys_flag & TRANSACTION_MASK or (batch is not None and (not batch.isascii() or batch.lower() == "true"))):
        return None
    topic, text = fields["topic"], fields["properties"] or ""
    topic_bytes = _utf8(topic)
    if (topic_bytes is None or len(topic_bytes) > MAX_TOPIC_FIELD_LENGTH or None in map(_utf8, (
            text, region, trace_on, cluster)) or len(born_host) not in (8, 20) or len(store_host) not in (8, 20)
            or not 0 < map_capacity <= 1 << 30 or map_capacity & (map_capacity - 1)):
        return None
    props = decode_properties(text)
    if any(not name.isascii() or name in _GENERAL_NAMES for name in props):
        return None
    props |= {PROPERTY_MSG_REGION: region, PROPERTY_TRACE_SWITCH: trace_on, PROPERTY_CLUSTER: cluster}
    uniq_key = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq_key is None or len(props) > MAX_PROPERTIES:
        return None
    msg = StoreMessage(topic, queue_id, bytes(body), java_ordered(props, map_capacity), flag, sys_flag | sys_flag_bits,
                       born_timestamp, born_host, reconsume_times)
    try:
        return encode_ahead(msg, store_host, max_body, max_record), queue_id, uniq_key
    except ValueError:  # a limit passed
        return None


try:
    from broker._speedups import send_record
except ImportError:  # built without a C compiler: every send takes the general path
    send_record = None

# What is known of a topic: the config it was looked at under, its larger queue count (0: the general path takes
# its sends) and the sysFlag bits it adds.
_Admitted = tuple[TopicConfig, int, int]


class SingleSends:
    """The fast path of one SendMessageProcessor: ``record_of`` a request, or None for the general path."""

    def __init__(self, broker_config: BrokerConfig, store_config: MessageStoreConfig,
                 topic_config_manager: TopicConfigManager, store_host: bytes, region_id: str, trace_on: str) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.topic_config_manager = topic_config_manager
        self.store_host = store_host
        self.region_id = region_id
        self.trace_on = trace_on
        self._names = ({} if send_record is None else {
            RequestCode.SEND_MESSAGE: send_record_names(None),
            RequestCode.SEND_MESSAGE_V2: send_record_names(SendMessageRequestHeader.V2_WIRE)})
        self._topics: dict[str, _Admitted] = {}
        answer = SendMessageResponseHeader.wire_names()
        self._answer_names = (answer["msg_id"], answer["queue_id"], answer["queue_offset"], answer["transaction_id"])

    def record_of(self, remote_address: str, request: RemotingCommand) -> tuple[str, bytearray, int, str] | None:
        """(topic, record encoded ahead, queue id, UNIQ_KEY) of a single send of the common shape, else None."""
        names = self._names.get(request.code)
        if names is None:
            return None
        ext = request.ext_fields
        topic = ext.get(names[1])
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return None
        admitted = self._topics.get(topic)
        if admitted is None or admitted[0] is not config:
            admitted = self._admit(topic, config)
        _, queue_limit, sys_flag_bits = admitted
        if not queue_limit or (config.order and not is_writeable(self.broker_config.broker_permission)):
            return None
        limit = self.store_config.max_message_size
        made = send_record(ext, names, request.body, queue_limit, sys_flag_bits, born_host(remote_address),
                           self.store_host, self.region_id, self.trace_on, self.broker_config.broker_cluster_name,
                           limit, limit + RECORD_HEADROOM, PROPERTIES_MAP_CAPACITY)
        return None if made is None else (topic, *made)

    def answer(self, request: RemotingCommand, append: AppendMessageResult, queue_id: int,
               uniq_key: str) -> RemotingCommand:
        """SendMessageProcessor's answer to a single send stored with PUT_OK (its put_response), made directly: the
        extFields the general path puts together from MSG_REGION, TRACE_ON and a SendMessageResponseHeader, in
        their order."""
        msg_id, queue_id_name, queue_offset, transaction_id = self._answer_names
        return create_response(request, ResponseCode.SUCCESS, ext_fields={
            PROPERTY_MSG_REGION: self.region_id, PROPERTY_TRACE_SWITCH: self.trace_on, msg_id: append.msg_id_text,
            queue_id_name: str(queue_id), queue_offset: str(append.queue_offset), transaction_id: uniq_key})

    def _admit(self, topic: str, config: TopicConfig) -> _Admitted:
        """msgCheck's checks that depend on the topic alone, and the general path's topics: a retry topic (retries
        and the DLQ), a compacted one (KEYS required)."""
        taken = (v.validate_topic(topic).valid and not v.is_not_allowed_send_topic(topic)
                 and not v.is_retry_topic(topic) and not config.compacted)
        queue_limit = max(config.write_queue_nums, config.read_queue_nums) if taken else 0
        sys_flag_bits = _MULTI_TAGS if config.topic_filter_type is TopicFilterType.MULTI_TAG else 0
        if len(self._topics) >= TOPICS_MAX:
            self._topics.clear()
        admitted = self._topics[topic] = (config, queue_limit, sys_flag_bits)
        return admitted
