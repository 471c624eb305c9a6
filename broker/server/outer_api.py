"""The broker's calls to NameServers (Java's BrokerOuterAPI): REGISTER_BROKER to every NameServer at start and
every registerNameServerPeriod (the answer names this broker's master: BrokerController.on_registered),
UNREGISTER_BROKER at shutdown. A NameServer that does not answer is logged and
tried again next period; the others are unaffected."""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import TYPE_CHECKING

from broker.common.fastjson import encode_json
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)

if TYPE_CHECKING:
    from broker.server.broker_controller import BrokerController

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_MS = 6000


def namesrv_addresses(controller: BrokerController) -> list[str]:
    return [a.strip() for a in controller.broker_config.namesrv_addr.split(";") if a.strip()]


def _unregister_header(controller: BrokerController) -> UnRegisterBrokerRequestHeader:
    config = controller.broker_config
    return UnRegisterBrokerRequestHeader(broker_name=config.broker_name, broker_addr=controller.broker_addr,
                                         cluster_name=config.broker_cluster_name, broker_id=config.broker_id)


async def register_broker_all(controller: BrokerController) -> None:
    """REGISTER_BROKER to every NameServer under the brokerId the broker has now (a DLedger member that no election
    gave a role yet: -1, as Apache's)."""
    config = controller.broker_config
    body = encode_json({"topicConfigSerializeWrapper": controller.topic_config_manager.build_register_body(),
                        "filterServerList": []}).encode()
    header = RegisterBrokerRequestHeader(
        broker_name=config.broker_name, broker_addr=controller.broker_addr, cluster_name=config.broker_cluster_name,
        ha_server_addr=controller.ha_server_addr, broker_id=config.broker_id,
        enable_acting_master=False, compressed=False, body_crc32=zlib.crc32(body) & 0x7FFFFFFF,  # UtilAll.crc32
    )
    answers = await _call_all(controller, RequestCode.REGISTER_BROKER, header.to_ext(), body)
    for answer in answers:  # handleRegisterBrokerResult: the first NameServer that answered
        result = RegisterBrokerResponseHeader.from_ext(answer.ext_fields)
        controller.on_registered(result.ha_server_addr, result.master_addr)
        break


async def unregister_broker_all(controller: BrokerController) -> None:
    await _call_all(controller, RequestCode.UNREGISTER_BROKER, _unregister_header(controller).to_ext(), b"")


async def _call_all(controller: BrokerController, code: int, header: dict[str, str],
                    body: bytes) -> list[RemotingCommand]:
    """The SUCCESS answers, in the order of namesrvAddr."""
    async def call(addr: str) -> RemotingCommand | None:
        try:
            response = await controller.outer_client.invoke(addr, create_request(code, header, body),
                                                            REGISTER_TIMEOUT_MS)
            if response.code == ResponseCode.SUCCESS:
                return response
            log.warning("%s to %s answered %s: %s", code, addr, response.code, response.remark)
        except Exception as err:  # one unreachable NameServer must not stop the others
            log.warning("%s to %s failed: %s", code, addr, err)
        return None

    answers = await asyncio.gather(*(call(a) for a in namesrv_addresses(controller)))
    return [answer for answer in answers if answer is not None]

