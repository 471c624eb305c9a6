"""Master–slave replication, RocketMQ's DefaultHAService byte for byte (a slave of Apache's replicates from ours and
ours from Apache's).

``protocol`` (the HA wire: slave reports, master frames), ``ha_service`` (HAService: the master's accept thread, its
HAConnections, what SYNC_MASTER puts wait for, the slave's HAClient), ``ha_connection`` (one slave as its master
serves it), ``ha_client`` (a slave following its master), ``group_transfer`` (SYNC_MASTER puts waiting for their
slaves, on the broker's event loop), ``flow`` (bytes moved in the last second, per connection), ``runtime`` (what
GET_BROKER_HA_STATUS reports, as plain values the broker turns into the wire body).

May import: ``broker.common`` and ``broker.store``. The broker (``broker.server``) owns an HAService; nothing here
knows requests, topics or clients. This face re-exports nothing.
"""
