"""RocketMQ's remoting protocol, shared by the broker, the NameServer, the client and the tools.

Sans-IO (no sockets, no event loop; the blocking client and the asyncio side share them): ``codes`` (RequestCode,
ResponseCode and the other code tables; a leaf that imports nothing), ``frame`` (the frame layout), ``command``
(RemotingCommand and its JSON and ROCKETMQ header encodings), ``headers`` (one dataclass per custom header),
``route`` (the NameServer's JSON bodies: TopicRouteData, ClusterInfo, the register body), ``heartbeat``
(HeartbeatData, ConsumerData, SubscriptionData), ``subscription`` (SubscriptionGroupConfig), ``admin_bodies``
(TopicStatsTable, ConsumeStats, ConsumerConnection: what the broker answers the admin tools), ``exchange``
(RemotingExchange: one connection's requests, matched to their responses by opaque), ``signing`` (the
signed content and HmacSHA1 signature of a request: AclClientRPCHook's, and the broker's check of it).
asyncio: ``stream`` (the sockets' streams: each read goes straight to its connection), ``connection`` (one
connection driving an exchange), ``client`` (RemotingClient), ``server``
(RemotingServer and ``run_server``).

May import: ``broker.common`` and ``broker._speedups`` (the ROCKETMQ header codec in C). This face re-exports
nothing, so that ``broker.common.errors`` can read ``codes`` without a cycle; import from the modules.
"""
