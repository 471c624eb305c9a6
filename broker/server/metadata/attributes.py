"""Which topic and subscription group attributes exist and how an admin's "+key"/"-key" edits apply to them (Java's
AttributeUtil, TopicAttributes and SubscriptionGroupAttributes). The parser of the edits' text is
``broker.common.attributes``'s.

Examples:
    >>> alter_attributes(True, TOPIC_ATTRIBUTES, {}, {"+message.type": "FIFO"})
    {'message.type': 'FIFO'}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

# An attribute: whether an update may change it, and the check of its value (ValueError names the fault).
Attribute = tuple[bool, Callable[[str], None]]


def _enum(*values: str) -> Callable[[str], None]:
    def verify(value: str) -> None:
        if value not in values:
            raise ValueError(f"value is not in set: [{', '.join(values)}]")
    return verify


def _long_range(low: int, high: int) -> Callable[[str], None]:
    def verify(value: str) -> None:
        try:
            number = int(value)
        except ValueError as err:
            raise ValueError(f'For input string: "{value}"') from err
        if not low <= number <= high:
            raise ValueError(f"value is not in range({low}, {high})")
    return verify


def _boolean(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise ValueError("boolean attribute format is wrong.")


def _any(value: str) -> None:
    return None


# name -> (changeable, verify)
TOPIC_ATTRIBUTES: Mapping[str, Attribute] = {
    "queue.type": (False, _enum("BatchCQ", "SimpleCQ")),
    "cleanup.policy": (False, _enum("DELETE", "COMPACTION")),
    "message.type": (True, _enum("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "PRIORITY", "LITE",
                                 "MIXED")),
    "reserve.time": (True, _long_range(-1, 2**63 - 1)),
    "lite.topic.expiration": (True, _long_range(-1, 30 * 24 * 60)),
}
GROUP_ATTRIBUTES: Mapping[str, Attribute] = {
    "priority.factor": (True, _long_range(0, 100)),
    "lite.bind.topic": (True, _any),
    "lite.sub.model": (True, _enum("Shared", "Exclusive")),
    "lite.sub.reset.offset.exclusive": (True, _boolean),
    "lite.sub.reset.offset.unsubscribe": (True, _boolean),
    "lite.sub.client.quota": (True, _long_range(-1, 2**63 - 1)),
    "lite.sub.client.max.event.cnt": (True, _long_range(10, 2**63 - 1)),
    "lite.sub.wildcard": (True, _any),
}


def alter_attributes(create: bool, known: Mapping[str, Attribute],
                     current: Mapping[str, str], edits: Mapping[str, str]) -> dict[str, str]:
    """AttributeUtil.alterCurrentAttributes: apply "+key"/"-key" edits to ``current``; ValueError names the fault."""
    final, seen = dict(current), set()
    for key, value in edits.items():
        name = key[1:]
        if not name or "+" in name or "-" in name:
            raise ValueError("kv string format wrong.")
        if name in seen:
            raise ValueError(f"alter duplication key. key: {name}")
        seen.add(name)
        if create and not key.startswith("+"):
            raise ValueError(f"only add attribute is supported while creating topic. key: {name}")
        if not create and key.startswith("-") and name not in current:
            raise ValueError(f"attempt to delete a nonexistent key: {name}")
        if not create and not key.startswith(("+", "-")):
            raise ValueError(f"wrong format key: {name}")
        attribute = known.get(name)
        if attribute is None:
            raise ValueError(f"unsupported key: {name}")
        changeable, verify = attribute
        if not create and not changeable:
            raise ValueError(f"attempt to update an unchangeable attribute. key: {name}")
        if key.startswith("-"):
            final.pop(name, None)
        else:
            verify(value)
            final[name] = value
    return final
