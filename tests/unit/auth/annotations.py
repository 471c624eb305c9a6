"""Reads Apache's ``@RocketMQAction``/``@RocketMQResource`` annotations out of rocketmq-remoting's sources jar, the way
``RequestHeaderRegistry`` and ``DefaultAuthorizationContextBuilder`` read them at run time: per header class its
request code, class-level resource type, actions, and the annotated fields it declares (in declaration order)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

HEADER_PACKAGE = "org/apache/rocketmq/remoting/protocol/header/"
_ACTION = re.compile(r"@RocketMQAction\((?P<args>[^)]*)\)\s*public\s+(?:final\s+)?class\s+(?P<cls>\w+)")
_RESOURCE = re.compile(r"@RocketMQResource\((?P<args>[^)]*)\)(?:\s*@\w+(?:\([^)]*\))?)*\s*"
                       r"(?:private|protected|public)\s+\w+\s+(?P<field>\w+)\s*(?:=\s*(?P<default>[^;]+))?;")
_CONSTANTS = {"TOPIC_NAME_SEPARATOR": ";"}  # TopicQueueId... GetConsumeStatsRequestHeader's separator


def _names(text: str, prefix: str) -> list[str]:
    return re.findall(prefix + r"\.(\w+)", text)


def _splitter(args: str) -> str:
    found = re.search(r"splitter\s*=\s*(\"[^\"]*\"|\w+)", args)
    if found is None:
        return ""
    value = found.group(1)
    return value.strip('"') if value.startswith('"') else _CONSTANTS[value]


Row = tuple[str, str | None, tuple[str, ...], tuple[tuple[str, str, str, str | None], ...]]


def extract(sources_jar: Path) -> dict[str, Row]:
    """{class name: (RequestCode name, class resource type or None, action names, ((field, type, splitter,
    default literal), ...))}"""
    table = {}
    with zipfile.ZipFile(sources_jar) as jar:
        for name in jar.namelist():
            if not (name.startswith(HEADER_PACKAGE) and name.endswith(".java")):
                continue
            source = jar.read(name).decode("utf-8")
            action = _ACTION.search(source)
            if action is None:
                continue
            args = action["args"]
            code = re.search(r"value\s*=\s*RequestCode\.(\w+)", args)
            resource = re.search(r"resource\s*=\s*ResourceType\.(\w+)", args)
            fields = tuple((m["field"], _names(m["args"], "ResourceType")[0], _splitter(m["args"]),
                            m["default"].strip() if m["default"] else None)
                           for m in _RESOURCE.finditer(source))
            table[action["cls"]] = (code.group(1) if code else "", resource.group(1) if resource else None,
                                    tuple(_names(args.split("action", 1)[1], "Action")), fields)
    return table
