"""Topic and group attributes as admin requests carry them (Java's AttributeParser): the one parser shared by the
broker's admin processor and ``mqadmin``, and its inverse, which the topic-creation request uses."""

from __future__ import annotations

from collections.abc import Mapping


def parse_attributes(text: str | None) -> dict[str, str]:
    """AttributeParser.parseToMap: "+a=b,+c=d,-e" to {"+a": "b", "+c": "d", "-e": ""}; ValueError as Java throws.

    Examples:
        >>> parse_attributes("+queue.type=BatchCQ,-x")
        {'+queue.type': 'BatchCQ', '-x': ''}
    """
    attributes: dict[str, str] = {}
    for kv in (text or "").split(",") if text else ():
        if "=" in kv:
            key, value = kv.split("=")[:2]
            if "+" not in key:
                raise ValueError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise ValueError(f"delete attribute format is wrong: {key}")
        if key in attributes:
            raise ValueError(f"key duplication: {key}")
        attributes[key] = value
    return attributes


def attributes_to_string(attributes: Mapping[str, str]) -> str:
    """AttributeParser.parseToString: the inverse of parse_attributes, as admin requests carry attributes.

    Examples:
        >>> attributes_to_string({"+queue.type": "BatchCQ", "-x": ""})
        '+queue.type=BatchCQ,-x'
    """
    return ",".join(f"{k}={v}" if v else k for k, v in attributes.items())
