"""Which header classes the broker parses for each request code a client can send, and plausible ext fields for them.

The table is the server's (``broker.server.processors.request_headers.REQUEST_HEADERS``, which the processors parse
through); a client also sends fields no processor reads, listed in CLIENT_ONLY_HEADERS. Codes with no header class
of their own (GET_BROKER_CONFIG, GET_ALL_TOPIC_CONFIG, ...) get the resource fields ACL 2.0 reads from them.
"""

from __future__ import annotations

import dataclasses
import typing

from broker.auth.actions import ANNOTATED
from broker.common.properties import to_camel
from broker.remoting import headers as h
from broker.remoting.codes import RequestCode
from broker.server.processors.request_headers import REQUEST_HEADERS, HeaderParse

# Apache 5.5's QueryMessageRequestHeader fields beside the key (which index, the last key of a page): mqadmin sends
# them, rmq's store answers by key alone
CLIENT_ONLY_HEADERS: dict[int, tuple[HeaderParse, ...]] = {
    RequestCode.QUERY_MESSAGE: ((h.QueryMessageIndexHeader, None),),
}
HEADER_CLASSES: dict[int, tuple[HeaderParse, ...]] = {
    code: REQUEST_HEADERS.get(code, ()) + CLIENT_ONLY_HEADERS.get(code, ())
    for code in REQUEST_HEADERS.keys() | CLIENT_ONLY_HEADERS.keys()}

_SAMPLE_TEXT = {"topic": "TopicA", "b": "TopicA", "consumerGroup": "G1", "group": "G1", "producerGroup": "PG",
                "a": "PG", "c": "TBW102", "clusterName": "DefaultCluster", "username": "alice",
                "subject": "User:alice", "accessKey": "RocketMQ", "globalWhiteAddrs": "10.10.*"}


def _sample(name: str, kind: type) -> str:
    if kind is bool:
        return "false"
    if kind is int:
        return "4" if name in ("d", "defaultTopicQueueNums", "maxMsgNums") else "0"
    return _SAMPLE_TEXT.get(name, f"{name}-value")


def sample_fields(code: int) -> dict[str, str]:
    """Ext fields a client sends with ``code``: every field of its header classes (required and optional alike),
    else the resource fields ACL 2.0 reads for it."""
    fields: dict[str, str] = {}
    for cls, wire in HEADER_CLASSES.get(code, ()):
        hints = typing.get_type_hints(cls)
        names = {**cls.WIRE, **(wire or {})}
        for f in dataclasses.fields(cls):
            kinds = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
            wire_name = names.get(f.name) or to_camel(f.name)
            fields[wire_name] = _sample(wire_name, kinds[0])
    rule = ANNOTATED.get(code)
    for resource_field in rule.fields if rule else ():
        fields.setdefault(resource_field.name, _sample(resource_field.name, str))
    return fields
