"""What every side of rmq shares: the broker, the NameServer, the client, the tools and the Spark connector.

``errors`` (the one error tree and its response-code table), ``message`` (MessageConst properties, sys flags,
message ids, Java's String.hashCode), ``record`` (the CommitLog record), ``message_batch`` (SEND_BATCH_MESSAGE body),
``topic`` (TopicConfig, PermName), ``validation`` (topic and group names, system topics and groups),
``fastjson`` (RocketMQ's JSON dialect, DataVersion), ``persist`` (crash-safe files), ``properties`` (Java
``.properties`` files and config dataclasses), ``attributes`` (topic attributes), ``hash_order`` (Java's HashMap
iteration order, for byte-identical JSON), ``config_manager`` (ConfigManager: a table kept in one JSON file),
``logs`` (the servers' log files, rolled as Apache's, and what goes to stderr).

May import: the standard library, numpy, ``broker._speedups``, and ``broker.remoting.codes`` (a leaf table).
Nothing here opens a socket or starts a thread, but for the one thread that writes a server's log files
(``logs.start_logging``, called once by a server's startup).
"""
