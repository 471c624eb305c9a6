"""DLedger: a broker's CommitLog as a Raft log (RocketMQ's DLedger mode), byte for byte as openmessaging/dledger and
Apache RocketMQ's DLedgerCommitLog keep it, so that a store either side wrote opens in the other.

``layout`` (data entries, index units, the pad, the member folder's files), ``mmap_file_list`` (data or index files,
rolled with a pad), ``store`` (DLedgerMmapFileStore: append, read, truncate, recover, the committed index),
``member_state`` (term and vote), ``commit_log`` (DLedgerCommitLog: CommitLog records in entries, read by physical
offset, dispatched to ConsumeQueue and IndexFile).

The election and replication: ``protocol`` (DLedger's request and response codes and JSON bodies), ``rpc`` (the
members' calls over RocketMQ remoting), ``elector`` (LeaderElector: votes, heartbeats, stepping down), ``pusher``
(the leader pushing its log to each follower, the quorum moving the committed index), ``entry_handler`` (a follower
taking the pushes), ``server`` (DLedgerServer: one member; ``append`` returns once committed), ``config``
(DLedgerConfig: the broker's dLeger keys and DLedger's timings).

The broker's store in DLedger mode: ``message_store`` (DLedgerMessageStore: puts appended and answered once
committed, dispatch of committed entries, reads across ``dividedCommitlogOffset``).

May import: ``broker.common``, ``broker.store`` and ``broker.remoting``. This face re-exports nothing.
"""
