"""ACL 1.0's remote address patterns (``RemoteAddressStrategyFactory``): an account's ``whiteRemoteAddress`` and the
global white list of ``plain_acl.yml``. A pattern is compiled once, when the file is loaded; a bad one is an
``AclException`` with Apache's message, so a broken file is refused as a whole.

Patterns: blank matches nothing; ``*``, ``*.*.*.*`` and ``*:*:*:*:*:*:*:*`` match everything; ``192.168.1.{1,2}``
lists full addresses (IPv6: ``…:{a,b}``); ``1.1.1.1,2.2.2.2`` too; ``192.168.*.*`` and ``192.168.1.1-100`` are a
range on the first octet (after the first) that is ``*`` or ``a-b``, the octets after it ignored; anything else one
exact address (IPv6 compared after expansion).

Examples:
    >>> address_pattern("192.168.1.1-100").matches("192.168.1.77"), address_pattern("10.*.*.*").matches("11.0.0.1")
    (True, False)
    >>> address_pattern("192.168.0.{1,2}").matches("192.168.0.2"), address_pattern("").matches("127.0.0.1")
    (True, False)
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from broker.common.errors import AclException

ANYWHERE = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _expand(text: str) -> str:
    """AclUtils.expandIP: an IPv6 address as eight upper-case groups of four digits; other text unchanged."""
    return ipaddress.IPv6Address(text).exploded.upper() if _is_ipv6(text) else text


def _full_address(text: str) -> str:
    if _is_ipv4(text):
        return text
    if _is_ipv6(text):
        return _expand(text)
    raise AclException(f"NetAddress examine Exception netAddress is {text}")


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One compiled pattern. ``kind`` says which of Apache's strategies it is; ``addresses`` holds the listed
    addresses (MULTIPLE, ONE), ``head``/``index``/``low``/``high`` the range (RANGE)."""

    kind: str  # "blank" | "any" | "multiple" | "one" | "range"
    addresses: frozenset[str] = frozenset()
    head: tuple[str, ...] = ()
    index: int = 0
    low: int = 0
    high: int = 0
    ipv6: bool = False

    def matches(self, ip: str) -> bool:
        if self.kind == "blank":
            return False
        if self.kind == "any":
            return True
        if self.kind in ("multiple", "one"):
            return _expand(ip).upper() in self.addresses
        return self._in_range(ip)

    def _in_range(self, ip: str) -> bool:
        if self.ipv6:
            if not _is_ipv6(ip):
                return False
            parts = _expand(ip).split(":")
            value = int(parts[self.index], 16)
        else:
            if not _is_ipv4(ip):
                return False
            parts = ip.split(".")
            value = int(parts[self.index])
        return tuple(parts[:self.index]) == self.head and self.low <= value <= self.high


def _listed(pattern: str) -> AddressPattern:
    """``192.168.1.{1,2}`` / ``…:{a,b}``: AclUtils.getAddresses, every address checked."""
    separator = ":" if ":" in pattern else "."
    parts = [p for p in pattern.split(separator) if p]
    if separator == "." and len(parts) < 4:
        raise AclException(f"MultipleRemoteAddressStrategy has got a/some wrong format IP(s): {pattern} ")
    if not parts[-1].startswith("{"):
        raise AclException(f"MultipleRemoteAddressStrategy netAddress examine scope Exception netAddress: {pattern}")
    head = pattern[:len(pattern) - len(parts[-1])]
    tails = parts[-1][1:-1].split(",")
    return AddressPattern("multiple", frozenset(_full_address(head + t.strip()).upper() for t in tails))


def _range_bounds(value: str, base: int, top: int) -> tuple[int, int] | None:
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    if value.startswith("-"):
        raise AclException(f"RangeRemoteAddressStrategy netAddress examine scope Exception value {value} ")
    low_text, _, high_text = value.partition("-")
    try:
        low, high = int(low_text, base), int(high_text, base)
    except ValueError as err:
        raise AclException(f"NetAddress examine Exception netAddress is {value}") from err
    if not (0 <= low <= high <= top):
        raise AclException(f"RangeRemoteAddressStrategy netAddress examine scope Exception start is {low} , end is "
                           f"{high}")
    return low, high


def _range(pattern: str) -> AddressPattern:
    """RangeRemoteAddressStrategy: the first part after the first that is ``*`` or ``a-b`` is the range."""
    ipv6 = ":" in pattern
    parts = pattern.split(":" if ipv6 else ".")
    if not ipv6 and len(parts) != 4 or ipv6 and len(parts) > 8:
        raise AclException(f"NetAddress examine Exception netAddress is {pattern}")
    for index in range(1, len(parts)):
        bounds = _range_bounds(parts[index].strip(), 16 if ipv6 else 10, 0xFFFF if ipv6 else 255)
        if bounds is None or bounds[1] == 0:
            continue
        head = tuple(p.strip() for p in parts[:index])
        for part in head:  # AclUtils.verify: the fixed parts are real octets (groups)
            ok = all(c in "0123456789abcdefABCDEF" for c in part) and 0 < len(part) <= 4 if ipv6 else (
                part.isdigit() and int(part) <= 255)
            if not ok:
                raise AclException(f"NetAddress examine Exception netAddress is {pattern}")
        if ipv6:
            head = tuple(p.upper().rjust(4, "0") for p in head)
        return AddressPattern("range", head=head, index=index, low=bounds[0], high=bounds[1], ipv6=ipv6)
    raise AclException(f"NetAddress examine Exception netAddress is {pattern}")


def address_pattern(pattern: str | None) -> AddressPattern:
    """RemoteAddressStrategyFactory.getRemoteAddressStrategy; AclException for a pattern Apache refuses."""
    if pattern is None or not pattern.strip():
        return AddressPattern("blank")
    if pattern in ANYWHERE:
        return AddressPattern("any")
    if pattern.endswith("}"):
        return _listed(pattern)
    if "," in pattern:
        return AddressPattern("multiple", frozenset(_full_address(a).upper() for a in pattern.split(",") if a))
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    return AddressPattern("one", frozenset({_full_address(pattern).upper()}))
