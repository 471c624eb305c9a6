"""The order a broker writes a message's properties in: the iteration order of the Java HashMap they sit in when
Java's broker builds the properties string, so that our records are Apache's byte for byte.

Rule 1: this order and the map capacities that decide it are defined here and nowhere else; the send and
send-back processors, the schedule service and the transaction bridge all build their messages through it.

Examples:
    >>> java_ordered({"KEYS": "k", "TAGS": "t", "UNIQ_KEY": "u"})  # doctest: +SKIP
    {'UNIQ_KEY': 'u', 'KEYS': 'k', 'TAGS': 't'}
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.common.hash_order import hash_map_order

PROPERTIES_MAP_CAPACITY = 128  # MessageDecoder.string2messageProperties: the map a decoded record's properties are in
MESSAGE_MAP_CAPACITY = 16  # new HashMap<>(): a fresh Message's properties


def java_ordered(properties: Mapping[str, str], capacity: int = PROPERTIES_MAP_CAPACITY) -> dict[str, str]:
    """``properties`` (in insertion order) as the Java HashMap of ``capacity`` holding them iterates. The order
    depends only on the keys in insertion order, and a producer's messages mostly share theirs: it is remembered per
    key tuple (hashing every key in Python was a tenth of the broker's time under transactional sends)."""
    keys = tuple(properties)
    order = _ORDERS.get((keys, capacity))
    if order is None:
        if len(_ORDERS) >= _ORDERS_MAX:
            _ORDERS.clear()
        order = _ORDERS[keys, capacity] = hash_map_order(keys, capacity)
    return {key: properties[key] for key in order}


_ORDERS: dict[tuple[tuple[str, ...], int], list[str]] = {}
_ORDERS_MAX = 4096  # distinct key tuples remembered (cleared when full: user properties can vary without bound)
