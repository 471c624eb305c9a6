"""``mqbroker``: start a broker as RocketMQ's ``mqbroker -c conf/broker.conf [-n namesrvAddr] [-p]``.

Before the boot line it prints where its files are, as absolute paths: the store (storePathRootDir, the CommitLog)
and the logs (broker/common/logs.py: broker.log, store.log, remoting.log... Apache's names, under logDir).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from broker.common.errors import RmqError
from broker.common.logs import BROKER_LAYOUT, HeldRecords, start_logging
from broker.remoting.server import run_server
from broker.server.broker_controller import BrokerController
from broker.server.config import format_config, load_broker_config

log = logging.getLogger("broker.server.startup")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mqbroker", description="Start an rmq broker (RocketMQ compatible).")
    parser.add_argument("-c", "--configFile", dest="config_file", help="broker config file (properties format)")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help="NameServer list, e.g. 127.0.0.1:9876")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="print the effective configuration and exit")
    parser.add_argument("-m", "--printImportantConfig", dest="print_config", action="store_true",
                        help=argparse.SUPPRESS)
    return parser.parse_args(argv)


GC_YOUNG_THRESHOLD = 10_000


async def serve(controller: BrokerController) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await controller.start()
    gc.freeze()  # what start-up made lives as long as the broker: the collector's full passes need not walk it again
    # A young collection every GC_YOUNG_THRESHOLD allocations instead of 700: a request makes hundreds of short-lived
    # objects, and the open transactions of a big prepared job are many long-lived ones (measured: 9.1 -> 6.5 us per
    # prepared batch item with 256,000 open); a young pass over 10,000 objects takes well under a millisecond.
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    print(f"The broker[{controller.broker_config.broker_name}, {controller.broker_addr}] boot success. "
          f"serializeType=JSON and name server is {controller.broker_config.namesrv_addr}", flush=True)
    await stop.wait()
    await controller.shutdown()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    overrides = {"namesrvAddr": args.namesrv_addr} if args.namesrv_addr else {}
    held = HeldRecords()  # reading the config may warn: those lines belong in broker.log too
    try:
        broker_config, store_config = load_broker_config(args.config_file, overrides)
    except (RmqError, OSError) as err:
        held.to_stderr()
        sys.exit(f"mqbroker: {err}")
    if args.print_config:
        held.to_stderr()
        print(format_config(broker_config, store_config))
        return
    settings = broker_config.log_settings(store_config.d_leger_self_id if store_config.enable_d_leger_commit_log
                                          else "")
    try:
        start_logging(settings, BROKER_LAYOUT, held)
    except OSError as err:
        held.to_stderr()
        sys.exit(f"mqbroker: cannot write logs under {settings.log_dir}: {err}")
    # Absolute, whatever the file said: the directories an operator must back up, watch and never share.
    print(f"The broker's store: {store_config.store_path_root_dir} (CommitLog {store_config.commit_log_dir}); "
          f"logs: {settings.log_dir}", flush=True)
    log.info("storePathRootDir %s, CommitLog %s, logs under %s", store_config.store_path_root_dir,
             store_config.commit_log_dir, settings.log_dir)
    try:
        run_server(serve(BrokerController(broker_config, store_config)))
    except (RmqError, OSError) as err:  # a port taken (listenPort, metricsPromExporterPort...): one line, no trace
        log.error("the broker did not start: %s", err)
        sys.exit(f"mqbroker: {err}")


if __name__ == "__main__":
    main()
