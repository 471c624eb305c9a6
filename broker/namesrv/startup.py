"""``python -m broker.namesrv`` (installed as ``mqnamesrv``): run a NameServer until SIGTERM or SIGINT.

Options as NamesrvStartup's: ``-c/--configFile namesrv.conf`` (a properties file: listenPort, bindAddress,
kvConfigPath and the NamesrvConfig keys), ``-p/--printConfigItem`` (print the effective config and exit), and
``-n/--namesrvAddr`` (accepted and ignored, as Java does). Once listening it prints Java's boot line, with the real
port when listenPort is 0. A clean stop exits 0.

Before it, it prints where its files are (absolute paths): the KV config and the logs (broker/common/logs.py:
namesrv.log and namesrv_default.log, Apache's names, under logDir).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from broker.common.errors import ConfigError, MetadataCorrupt
from broker.common.logs import NAMESRV_LAYOUT, HeldRecords, start_logging
from broker.namesrv.config import NamesrvConfig, format_config, load_namesrv_config
from broker.namesrv.server import NamesrvController
from broker.remoting.server import run_server

log = logging.getLogger("broker.namesrv")

BOOT_LINE = "The Name Server boot success. serializeType=JSON, address {}:{}"
PATHS_LINE = "The Name Server's KV config: {}; logs: {}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mqnamesrv", description="Run a RocketMQ NameServer.")
    parser.add_argument("-c", "--configFile", dest="config_file", help="Name server config properties file")
    parser.add_argument(
        "-p", "--printConfigItem", dest="print_config", action="store_true", help="Print all config items"
    )
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help="Name server address list (ignored)")
    return parser.parse_args(argv)


async def serve(config: NamesrvConfig) -> None:
    """Run until SIGTERM/SIGINT, then stop cleanly."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    controller = NamesrvController(config)
    await controller.start()
    try:
        print(BOOT_LINE.format(config.bind_address, controller.port), flush=True)
        log.info("namesrv listening on %s", controller.address)
        await stopping.wait()
        log.info("namesrv shutting down")
    finally:
        await controller.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    held = HeldRecords()
    try:
        config = load_namesrv_config(args.config_file)
    except ConfigError as err:
        held.to_stderr()
        print(f"mqnamesrv: {err}", file=sys.stderr)
        return 1
    if args.print_config:
        held.to_stderr()
        print(format_config(config), end="")
        return 0
    try:
        files = start_logging(config.log_settings(), NAMESRV_LAYOUT, held)
    except OSError as err:
        held.to_stderr()
        print(f"mqnamesrv: cannot write logs under {config.log_dir}: {err}", file=sys.stderr)
        return 1
    print(PATHS_LINE.format(config.kv_config_path, files.settings.log_dir), flush=True)
    log.info("kvConfigPath %s, configStorePath %s, logs under %s", config.kv_config_path, config.config_store_path,
             files.settings.log_dir)
    try:
        run_server(serve(config))
    except (MetadataCorrupt, ConfigError, OSError) as err:
        print(f"mqnamesrv: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
