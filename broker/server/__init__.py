"""The broker daemon (``mqbroker``): BrokerController and what it runs.

``broker_controller`` (BrokerController: wires the store, metadata, services and processors together), ``config``
(BrokerConfig, the broker's properties file), ``startup`` (the command line), ``processors/`` (a class per
request family), ``metadata/`` (topics, subscription groups and consumer offsets in config/*.json),
``transaction/`` (half messages and their checks), ``filter/`` (tag and SQL92 subscriptions), ``schedule``
(delay levels), ``long_polling`` (pulls that wait for messages), ``consumer_manager`` and ``producer_manager``
(who is connected), ``stats`` (the broker's counters), ``outer_api`` (registering with the NameServers),
``message_properties`` (the order a broker writes a message's properties in), ``auth_pipeline`` (ACL 1.0's and ACL
2.0's check of every request before its processor).

May import: ``broker.common``, ``broker.remoting``, ``broker.store``, ``broker.replication``, ``broker.dledger`` and
``broker.auth``.
Nothing outside this room imports it but its entry points (``python -m broker``, ``mqbroker``) and tests. This
face re-exports nothing.
"""
