"""Request signing: what ``AclClientRPCHook`` adds to a request, and what a broker recomputes to check it.

Rule 1: the signed content and the signature are defined here and nowhere else. The client signs with
``sign_request`` as its very last step before the frame is encoded; the broker's check (``broker/auth``) and the
broker's own requests to NameServers and its master use the same functions, so both sides always agree.

The content is the values of the ext fields (the custom header's fields plus ``AccessKey`` and ``SecurityToken``) in
Java ``TreeMap`` order of their keys, ``Signature`` left out, joined with no separator, UTF-8, then the raw body.
The signature is ``Base64(HmacSHA1(secret, content))``, 28 characters. Java sorts keys by UTF-16 code units;
``_java_key`` gives Python's ``sorted`` that order for keys outside the Basic Multilingual Plane too.

Examples:
    >>> signature({"AccessKey": "rocketmq2", "SecurityToken": "tok", "a": "ProducerGroupA", "b": "TopicTest",
    ...            "e": "0"}, b"Hello RocketMQ", "12345678")
    '/EyChHGyFYSwSQcCzexAZqYyvzY='
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.remoting.command import RemotingCommand
from broker.remoting.frame import Buffer

# SessionCredentials' ext field names
ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
# MixAll.UNIQUE_MSG_QUERY_FLAG: a 5.x broker leaves it out of the content of requests from clients up to 4.9.3, which
# did not sign it (MQVersion.Version.V4_9_3.ordinal()).
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
V4_9_3 = 399


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """``SessionCredentials``: who signs (``access_key``), with what (``secret_key``), and an optional STS token."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("session credentials need both an access key and a secret key")

    def __repr__(self) -> str:  # the secret stays out of logs and tracebacks
        return f"SessionCredentials(access_key={self.access_key!r})"


def _java_key(key: str) -> list[int]:
    """A key as Java's ``String.compareTo`` sees it: UTF-16 code units."""
    data = key.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def _java_sorted(keys: Iterable[str]) -> list[str]:
    """Keys in Java ``TreeMap`` order. Python's code-point order is the same for ASCII keys (every header field's),
    and ``sorted`` of them costs a tenth of sorting by ``_java_key``: this runs for every signed request the broker
    checks."""
    keys = list(keys)
    return sorted(keys) if all(key.isascii() for key in keys) else sorted(keys, key=_java_key)


def _body_bytes(body: bytes | tuple[Buffer, ...] | None) -> bytes:
    if not body:
        return b""
    return bytes(body) if not isinstance(body, tuple) else b"".join(bytes(part) for part in body)


def signed_keys(keys: Iterable[str]) -> list[str]:
    """The ext field names whose values the content joins, in the order it joins them (``Signature`` left out): for
    callers that frame many requests alike and sign each one from its values (the blocking client's templates)."""
    return [key for key in _java_sorted(keys) if key != SIGNATURE]


def credential_fields(credentials: SessionCredentials) -> dict[str, str]:
    """The ext fields the hook adds before it signs: ``AccessKey``, and ``SecurityToken`` when there is one."""
    if credentials.security_token is None:
        return {ACCESS_KEY: credentials.access_key}
    return {ACCESS_KEY: credentials.access_key, SECURITY_TOKEN: credentials.security_token}


def signed_content(ext_fields: Mapping[str, str], body: bytes | tuple[Buffer, ...] | None = b"", *,
                   version: int | None = None) -> bytes:
    """``AclUtils.combineRequestContent``: the bytes the signature covers. ``version`` is the request's remoting
    version when a broker rebuilds the content (a client up to 4.9.3 did not sign ``_UNIQUE_KEY_QUERY``); a client
    signing its own request passes none."""
    skip = {SIGNATURE}
    if version is not None and version <= V4_9_3:
        skip.add(UNIQUE_MSG_QUERY_FLAG)
    values = "".join(ext_fields[key] for key in _java_sorted(ext_fields) if key not in skip)
    return values.encode("utf-8", "surrogatepass") + _body_bytes(body)


def calculate_signature(content: bytes, secret_key: str) -> str:
    """``AclSigner.calSignature``: Base64 (standard alphabet, padded) of HmacSHA1 keyed by the secret's UTF-8."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def signature(ext_fields: Mapping[str, str], body: bytes | tuple[Buffer, ...] | None, secret_key: str) -> str:
    """The signature of a request's ext fields and body, as a client computes it."""
    return calculate_signature(signed_content(ext_fields, body), secret_key)


def sign_request(request: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    """``AclClientRPCHook.doBeforeRequest``: the request with ``AccessKey``, ``SecurityToken`` (if any) and
    ``Signature`` added. Call it after every other ext field is set: what is signed must be what is sent."""
    fields = dict(request.ext_fields)
    fields.update(credential_fields(credentials))
    fields.pop(SIGNATURE, None)
    fields[SIGNATURE] = signature(fields, request.body, credentials.secret_key)
    return dataclasses.replace(request, ext_fields=fields)


def signature_matches(request: RemotingCommand, secret_key: str) -> bool:
    """The broker's check (``DefaultAuthenticationProvider``): the received ``Signature`` against the content
    rebuilt from the received fields, compared in constant time. A received one with a lone surrogate (a JSON header
    read without orjson keeps ``\\ud800`` as it is) is compared as its surrogate-passing bytes: it never matches."""
    received = request.ext_fields.get(SIGNATURE)
    if not received:
        return False
    expected = calculate_signature(signed_content(request.ext_fields, request.body, version=request.version),
                                   secret_key)
    return hmac.compare_digest(expected.encode("utf-8"), received.encode("utf-8", "surrogatepass"))
