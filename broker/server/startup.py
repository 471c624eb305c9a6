"""``mqbroker``: start a broker as RocketMQ's ``mqbroker -c conf/broker.conf [-n namesrvAddr] [-p]``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from broker.common.errors import RmqError
from broker.remoting.server import run_server
from broker.server.broker_controller import BrokerController
from broker.server.config import format_config, load_broker_config


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mqbroker", description="Start an rmq broker (RocketMQ compatible).")
    parser.add_argument("-c", "--configFile", dest="config_file", help="broker config file (properties format)")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help="NameServer list, e.g. 127.0.0.1:9876")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="print the effective configuration and exit")
    parser.add_argument("-m", "--printImportantConfig", dest="print_config", action="store_true",
                        help=argparse.SUPPRESS)
    return parser.parse_args(argv)


async def serve(controller: BrokerController) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await controller.start()
    gc.freeze()  # what start-up made lives as long as the broker: the collector's full passes need not walk it again
    print(f"The broker[{controller.broker_config.broker_name}, {controller.broker_addr}] boot success. "
          f"serializeType=JSON and name server is {controller.broker_config.namesrv_addr}", flush=True)
    await stop.wait()
    await controller.shutdown()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s - %(message)s")
    overrides = {"namesrvAddr": args.namesrv_addr} if args.namesrv_addr else {}
    try:
        broker_config, store_config = load_broker_config(args.config_file, overrides)
    except (RmqError, OSError) as err:
        sys.exit(f"mqbroker: {err}")
    if args.print_config:
        print(format_config(broker_config, store_config))
        return
    run_server(serve(BrokerController(broker_config, store_config)))


if __name__ == "__main__":
    main()
