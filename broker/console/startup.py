"""``mqconsole``: the web console as a command.

    mqconsole -n 127.0.0.1:9876 [--host 127.0.0.1] [--port 8080] [--accessKey AK --secretKey SK]

The NameServer comes from ``-n`` or the NAMESRV_ADDR variable, as for ``mqadmin``. Requests are signed with
``--accessKey``/``--secretKey`` when given, else with the keys of ``conf/tools.yml`` under the RocketMQ home
(``-Drocketmq.home.dir=DIR`` before the options, or ROCKETMQ_HOME), as ``mqadmin`` signs them. It prints the
console's address on its first line and serves until SIGINT or SIGTERM (exit status 0); bad options exit 2, a
port it cannot listen on 1, each with one line on stderr. It starts without the NameServer answering: the pages say
when the cluster cannot be reached.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from broker.common.errors import RmqError
from broker.console.sampler import DEFAULT_HISTORY_S, DEFAULT_INTERVAL_S, Sampler
from broker.console.server import start_console
from broker.remoting.signing import SessionCredentials
from broker.tools.admin_client import NAMESRV_ADDR_ENV
from broker.tools.auth_commands import tools_credentials, tools_home
from broker.tools.mqadmin import system_properties

DEFAULT_PORT = 8080  # rocketmq-dashboard's


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mqconsole", description="A web console for a RocketMQ cluster.")
    p.add_argument("-n", "--namesrvAddr", help=f"NameServer address list, eg: '192.168.0.1:9876;192.168.0.2:9876' "
                                               f"(default: ${NAMESRV_ADDR_ENV})")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1; 0.0.0.0 for all)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default: {DEFAULT_PORT}; "
                                                                   "0 for a free one)")
    p.add_argument("--accessKey", help="ACL access key to sign requests with (with --secretKey)")
    p.add_argument("--secretKey", help="ACL secret key")
    p.add_argument("--sampleInterval", type=float, default=DEFAULT_INTERVAL_S,
                   help=f"seconds between the charts' samples (default: {DEFAULT_INTERVAL_S:g})")
    p.add_argument("--history", type=float, default=DEFAULT_HISTORY_S,
                   help=f"seconds of samples kept for the charts (default: {DEFAULT_HISTORY_S:g})")
    return p


def credentials_of(args: argparse.Namespace, properties: dict[str, str]) -> SessionCredentials | None:
    if bool(args.accessKey) != bool(args.secretKey):
        raise ValueError("--accessKey and --secretKey go together")
    if args.accessKey:
        return SessionCredentials(args.accessKey, args.secretKey)
    return tools_credentials(tools_home(properties))


def main(argv: Sequence[str] | None = None) -> int:
    properties, rest = system_properties(list(sys.argv[1:] if argv is None else argv))
    p = parser()
    args = p.parse_args(rest)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s - %(message)s")
    try:
        credentials = credentials_of(args, properties)
    except ValueError as err:
        p.error(str(err))
    namesrv = args.namesrvAddr or os.environ.get(NAMESRV_ADDR_ENV, "")  # as mqadmin reads it
    if not namesrv:
        p.error(f"no NameServer: give -n or set {NAMESRV_ADDR_ENV}")
    try:
        Sampler.check(args.sampleInterval, args.history)
    except ValueError as err:
        p.error(str(err))
    try:
        console = start_console(namesrv, host=args.host, port=args.port, credentials=credentials,
                                sample_interval_s=args.sampleInterval, history_s=args.history)
    except (OSError, RmqError) as err:
        print(f"mqconsole: cannot start on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"mqconsole on {console.url} for the NameServer {namesrv}", flush=True)
    with console:
        stop.wait()
    return 0
