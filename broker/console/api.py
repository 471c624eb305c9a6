"""The console's JSON API: a request as the handlers read it (``ApiRequest``: path parameters, query and JSON body,
each value checked where it is read), the errors it answers with (``ApiError``, and ``error_answer``: what an error
of the cluster or of the console becomes, a status and a JSON body), the routes, and the state the handlers share
(``Console``).

Every handler is ``async def handler(console, request) -> JSON value`` and runs on the console's event loop, where the
one MQAdminExt lives; ``broker.console.server`` calls them from its HTTP threads.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from broker.common.errors import ClientErrorCode, MQBrokerError, MQClientError, RemotingError, RmqError
from broker.remoting.codes import ResponseCode
from broker.tools.admin import MQAdminExt

if TYPE_CHECKING:
    from broker.console.sampler import Sampler

log = logging.getLogger(__name__)

NOT_FOUND_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_MESSAGE, ResponseCode.QUERY_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.CONSUMER_NOT_ONLINE,
    ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION, ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION,
})
UNREACHABLE_CODES = frozenset({
    ClientErrorCode.CONNECT_BROKER_EXCEPTION, ClientErrorCode.ACCESS_BROKER_TIMEOUT,
    ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION, ClientErrorCode.NO_NAME_SERVER_EXCEPTION,
})


class ApiError(Exception):
    """An answer other than success, with the HTTP status and the sentence the page shows."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_answer(err: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and JSON body for ``err``: 400 for bad input, 404 for what the cluster does not have, 403 for a
    refusal of the ACL, 502 when the cluster cannot be reached or answers with an error, 500 (logged with its
    traceback, answered without it) for a fault of the console."""
    if isinstance(err, ApiError):
        return err.status, {"error": err.message}
    if isinstance(err, MQClientError | MQBrokerError):
        body = {"error": err.remark or str(err), "code": err.code}
        if err.code in NOT_FOUND_CODES:
            return 404, body
        if err.code == ResponseCode.NO_PERMISSION:
            return 403, body
        if err.code == ResponseCode.MESSAGE_ILLEGAL:
            return 400, body
        if err.code in UNREACHABLE_CODES:
            return 502, {**body, "error": f"cannot reach the cluster: {body['error']}"}
        return 502, {**body, "error": f"the cluster answered: {body['error']}"}
    if isinstance(err, RemotingError | OSError):
        return 502, {"error": f"cannot reach the cluster: {err}"}
    if isinstance(err, ValueError):
        return 400, {"error": str(err)}
    if isinstance(err, RmqError):
        return 502, {"error": str(err)}
    log.error("console request failed", exc_info=err)
    return 500, {"error": f"internal error of the console: {type(err).__name__}"}


_MISSING = object()


class ApiRequest:
    """One API call's inputs: ``params`` from the path, ``query`` from the URL, ``body`` from a JSON object. A value
    is looked up in that order; the readers raise ApiError(400) naming the field."""

    def __init__(self, params: Mapping[str, str], query: Mapping[str, str], body: Mapping[str, Any]) -> None:
        self.params, self.query, self.body = dict(params), dict(query), dict(body)

    def _raw(self, name: str) -> Any:
        for source in (self.params, self.query, self.body):
            value = source.get(name)
            if value is not None and value != "":
                return value
        return None

    def text(self, name: str, default: Any = _MISSING) -> Any:
        value = self._raw(name)
        if value is None:
            if default is _MISSING:
                raise ApiError(400, f"{name} is required")
            return default
        if not isinstance(value, str):
            raise ApiError(400, f"{name} must be a string, not {type(value).__name__}")
        return value.strip()

    def checked_name(self, name: str, validate: Callable[[str], Any]) -> str:
        """``text(name)`` passed through a validator of broker.common.validation (topic or group): ApiError(400)
        with its remark when it refuses the name."""
        value = self.text(name)
        checked = validate(value)
        if not checked:
            raise ApiError(400, checked.remark)
        return value

    def int(self, name: str, default: Any = _MISSING, *, minimum: int | None = None, maximum: int | None = None
            ) -> Any:
        value = self._raw(name)
        if value is None:
            if default is _MISSING:
                raise ApiError(400, f"{name} is required")
            return default
        try:
            number = int(value) if not isinstance(value, bool | float) else None
        except ValueError:
            number = None
        if number is None:
            raise ApiError(400, f"{name} must be an integer, not {value!r}")
        if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
            raise ApiError(400, f"{name} must be between {minimum} and {maximum}, not {number}")
        return number

    def bool(self, name: str, default: bool) -> bool:
        value = self._raw(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "1", "yes", "on"):
            return True
        if str(value).lower() in ("false", "0", "no", "off"):
            return False
        raise ApiError(400, f"{name} must be true or false, not {value!r}")

    def time_ms(self, name: str, default: Any = _MISSING) -> Any:
        """A time as epoch milliseconds, "now", or ISO 8601 (local time unless it has an offset)."""
        value = self._raw(name)
        if value is None:
            if default is _MISSING:
                raise ApiError(400, f"{name} is required")
            return default
        return parse_time_ms(name, value)


def parse_time_ms(name: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if text == "now":
        return time.time_ns() // 1_000_000
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ApiError(400, f"{name} must be epoch milliseconds, 'now' or an ISO 8601 time, not {text!r}") from None


@dataclass
class Console:
    """What the handlers share on the console's event loop: the admin client every call goes through, the sampler
    of the charts, and the consumer groups seen with a Spark query's client (remembered while the console runs:
    the query's driver announces itself to a broker once, and the broker forgets idle clients after two minutes)."""

    admin: MQAdminExt
    sampler: Sampler
    spark_groups: set[str] = field(default_factory=set)


Handler = Callable[[Console, ApiRequest], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Route:
    """``method`` and a path such as ``/api/topics/{topic}``: each ``{name}`` matches one path segment."""

    method: str
    path: str
    handler: Handler

    def match(self, segments: list[str]) -> dict[str, str] | None:
        """The path parameters, or None when the path is another."""
        parts = self.path.strip("/").split("/")
        if len(parts) != len(segments):
            return None
        params = {}
        for part, segment in zip(parts, segments, strict=True):
            if part.startswith("{") and part.endswith("}"):
                params[part[1:-1]] = segment
            elif part != segment:
                return None
        return params


def find_route(routes: tuple[Route, ...], method: str, segments: list[str]) -> tuple[Handler, dict[str, str]]:
    """The handler of ``method`` on the path ``segments`` (already unquoted); 404 for an unknown path, 405 for a
    known path and another method."""
    known_path = False
    for route in routes:
        params = route.match(segments)
        if params is not None:
            if route.method == method:
                return route.handler, params
            known_path = True
    if known_path:
        raise ApiError(405, f"{method} is not allowed on /{'/'.join(segments)}")
    raise ApiError(404, f"no such API: /{'/'.join(segments)}")
