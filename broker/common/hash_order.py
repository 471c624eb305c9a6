"""The iteration order of Java's HashMap and ConcurrentHashMap, so our JSON bodies list entries as Apache's do.

Rule 1: the only place that knows how Java orders hash tables. The NameServer's tables are HashMaps and
ConcurrentHashMaps, and fastjson2 writes maps, sets and the lists built from them in iteration order; a Java client
does not care, but byte-for-byte answers are how the tests prove the route data is Java's (and a diff against
Apache's NameServer stays readable). Python dicts keep insertion order, which is the input here.

Both tables iterate bin by bin (bin = spread(hashCode) & (capacity - 1)):

- ``java.util.HashMap``: a new key goes to the tail of its bin, and a resize splits each bin keeping the relative
  order, so the order is (bin at the final capacity, insertion order). The capacity doubles from its initial value
  whenever the size passes 3/4 of it.
- ``ConcurrentHashMap``: also appends to the tail, but its resize (``transfer``) keeps only the last run of nodes
  bound for the same half in order and prepends the nodes before that run one by one, reversing them. We replay the
  inserts and resizes, so that too is exact.

Exact for tables that only grew. Java never shrinks a table, so after removals that crossed a resize threshold
the real capacity is larger than the one derived here; bins of 8+ colliding keys (treeified in Java) are not
modelled either. Neither happens with the few brokers and clusters of a NameServer's maps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from broker.common.message import java_hash

K = TypeVar("K")

DEFAULT_CAPACITY = 16
MAXIMUM_CAPACITY = 1 << 30


def long_hash(value: int) -> int:
    """``Long.hashCode``: the two 32-bit halves XORed, as a signed int."""
    value &= 0xFFFFFFFFFFFFFFFF
    h = (value ^ (value >> 32)) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def key_hash(key: object) -> int:
    """``hashCode()`` of a map key as Java boxes it: str is String, int is Long (brokerId keys)."""
    if isinstance(key, str):
        return java_hash(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return long_hash(key)
    raise TypeError(f"no Java hashCode for {type(key).__name__} key {key!r}")


def _spread(h: int) -> int:
    """HashMap.hash / ConcurrentHashMap.spread: the high 16 bits folded into the low ones (as unsigned)."""
    h &= 0xFFFFFFFF
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def table_size_for(capacity: int) -> int:
    """The power of two a Java hash table rounds a requested capacity up to."""
    n = 1
    while n < capacity:
        n <<= 1
    return min(max(n, 1), MAXIMUM_CAPACITY)


def hash_map_order(keys: Iterable[K], initial_capacity: int = DEFAULT_CAPACITY, *,
                   hash_of: Callable[[K], int] = key_hash) -> list[K]:
    """``new HashMap<>(initial_capacity)`` after putting ``keys`` in this order: its iteration order. ``hash_of`` is
    the keys' ``hashCode()`` (a String's or a Long's by default).

    Examples:
        >>> hash_map_order(["broker-a", "broker-b"])  # "broker-b".hashCode() lands in an earlier bin
        ['broker-b', 'broker-a']
    """
    keys = list(keys)
    capacity = table_size_for(initial_capacity)
    while len(keys) > capacity * 3 // 4 and capacity < MAXIMUM_CAPACITY:
        capacity <<= 1
    mask = capacity - 1
    ranked = sorted(range(len(keys)), key=lambda i: (_spread(hash_of(keys[i])) & mask, i))
    return [keys[i] for i in ranked]


def hash_map_copy_order(keys: Sequence[K]) -> list[K]:
    """``new HashMap<>(map)`` / ``new HashSet<>(collection)`` of ``keys`` (in the source's iteration order)."""
    return hash_map_order(keys, max(int(len(keys) / 0.75) + 1, DEFAULT_CAPACITY))


def concurrent_map_capacity(initial_capacity: int) -> int:
    """The table length of ``new ConcurrentHashMap<>(initial_capacity)`` (Java 17's constructor)."""
    return table_size_for(int(1 + initial_capacity / 0.75))


def concurrent_map_order(keys: Iterable[K], initial_capacity: int | None = None) -> list[K]:
    """``new ConcurrentHashMap<>(initial_capacity)`` (default constructor when None) after putting ``keys``.

    Examples:
        >>> concurrent_map_order(["TopicA", "Shared", "中文"])
        ['中文', 'TopicA', 'Shared']
    """
    n = DEFAULT_CAPACITY if initial_capacity is None else concurrent_map_capacity(initial_capacity)
    bins: list[list[tuple[int, K]]] = [[] for _ in range(n)]
    count = 0
    for key in keys:
        h = _spread(key_hash(key))
        bins[h & (n - 1)].append((h, key))
        count += 1
        while count >= n - (n >> 2) and n < MAXIMUM_CAPACITY:  # addCount: resize once count reaches sizeCtl
            bins = _transfer(bins, n)
            n <<= 1
    return [key for nodes in bins for _, key in nodes]


def _transfer(bins: list[list[tuple[int, K]]], n: int) -> list[list[tuple[int, K]]]:
    """ConcurrentHashMap.transfer of a table of length ``n`` into one of ``2n``."""
    grown: list[list[tuple[int, K]]] = [[] for _ in range(2 * n)]
    for i, nodes in enumerate(bins):
        if not nodes:
            continue
        last_run = len(nodes) - 1
        while last_run > 0 and (nodes[last_run - 1][0] & n) == (nodes[last_run][0] & n):
            last_run -= 1
        run_high = bool(nodes[last_run][0] & n)
        low, high = ([], nodes[last_run:]) if run_high else (nodes[last_run:], [])
        for node in nodes[:last_run]:  # prepended one by one: reversed, in front of the run
            if node[0] & n:
                high = [node, *high]
            else:
                low = [node, *low]
        grown[i], grown[i + n] = low, high
    return grown
