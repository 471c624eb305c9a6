"""DLedger: a broker's CommitLog as a Raft log (RocketMQ's DLedger mode), byte for byte as openmessaging/dledger and
Apache RocketMQ's DLedgerCommitLog keep it, so that a store either side wrote opens in the other.

``layout`` (data entries, index units, the pad, the member folder's files), ``mmap_file_list`` (data or index files,
rolled with a pad), ``store`` (DLedgerMmapFileStore: append, read, truncate, recover, the committed index),
``member_state`` (term and vote), ``commit_log`` (DLedgerCommitLog: CommitLog records in entries, read by physical
offset, dispatched to ConsumeQueue and IndexFile).

May import: ``broker.common`` and ``broker.store``. This face re-exports nothing.
"""
