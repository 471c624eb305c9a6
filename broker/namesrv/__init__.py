"""The NameServer (``mqnamesrv``): brokers register their topics here, clients ask it for routes.

``route_table`` holds the rules (RouteInfoManager, sans-IO), ``broker_info`` the records it keeps about brokers,
``kv_config`` the KV store, ``config`` NamesrvConfig, ``processor`` the request handlers, ``server`` the running
NameServer (NamesrvController), ``startup`` the command line. The JSON bodies it answers with are
``broker.remoting.route``'s, shared with the client and the tools.

May import: ``broker.common`` and ``broker.remoting``. This face re-exports nothing: importing a module of this
room must not start a server.
"""
