"""The NameServer (``mqnamesrv``): brokers register their topics here, clients ask it for routes.

``route_table`` holds the rules (sans-IO), ``route_data`` the wire bodies, ``kv_config`` the KV store,
``processor`` the request handlers, ``server`` the running process, ``__main__`` the command line.
"""

from broker.namesrv.config import NamesrvConfig, load_namesrv_config
from broker.namesrv.kv_config import KVConfigManager
from broker.namesrv.route_data import BrokerData, ClusterInfo, QueueData, TopicRouteData
from broker.namesrv.route_table import BrokerRegistration, RouteInfoManager
from broker.namesrv.server import NamesrvController

__all__ = [
    "BrokerData",
    "BrokerRegistration",
    "ClusterInfo",
    "KVConfigManager",
    "NamesrvConfig",
    "NamesrvController",
    "QueueData",
    "RouteInfoManager",
    "TopicRouteData",
    "load_namesrv_config",
]
