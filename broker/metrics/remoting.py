"""``rocketmq_rpc_latency``: how long each request took from its arrival to its answer, per request code, response
code and outcome (Apache's RemotingMetricsManager, recorded where NettyRemotingAbstract writes a response).

The server calls ``record`` once per answered request with the codes as ints; they become Apache's names
(``RemotingHelper.getRequestCodeDesc``: the RequestCode field's name in lower case, or the number) only at scrape
time. Milliseconds are whole, as Java's ``elapsed(MILLISECONDS)``.
"""

from __future__ import annotations

import functools
import time

from broker.metrics.instruments import LabelValues, MetricsRegistry
from broker.metrics.names import PROTOCOL_TYPE_REMOTING, RESULT_ONEWAY, RESULT_SUCCESS, RPC_LATENCY
from broker.remoting.codes import AclV1RequestCode, RequestCode, ResponseCode, RmqRequestCode
from broker.remoting.command import RemotingCommand

_NS_PER_MS = 1_000_000


@functools.cache
def request_code_desc(code: int) -> str:
    for table in (RequestCode, RmqRequestCode, AclV1RequestCode):
        try:
            return table(code).name.lower()
        except ValueError:
            continue
    return str(code)


@functools.cache
def response_code_desc(code: int) -> str:
    try:
        return ResponseCode(code).name.lower()
    except ValueError:
        return str(code)


def _labels(key: tuple[int, int, bool, bool]) -> LabelValues:
    request_code, response_code, long_polling, oneway = key
    return (PROTOCOL_TYPE_REMOTING, request_code_desc(request_code), response_code_desc(response_code),
            "true" if long_polling else "false", RESULT_ONEWAY if oneway else RESULT_SUCCESS)


class RpcLatency:
    """The histogram, keyed by (request code, response code, long polling, oneway) as ints and bools."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self._histogram = registry.histogram(RPC_LATENCY, _labels)

    def record(self, request: RemotingCommand, response: RemotingCommand, started_ns: int,
               long_polling: bool = False) -> None:
        """``request`` was answered with ``response``; it arrived at ``time.monotonic_ns()`` ``started_ns``."""
        self._histogram.observe((request.code, response.code, long_polling, request.is_oneway),
                                (time.monotonic_ns() - started_ns) // _NS_PER_MS)
