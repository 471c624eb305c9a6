"""The message store, byte for byte Apache RocketMQ's on-disk format (a broker's storePathRootDir opens in either).

``message_store`` (MessageStore, the facade the broker uses), ``get_message`` (what a pull reads), ``commit_log``
(the append-only log, and a slave's append of its master's bytes), ``consume_queue`` (one index per topic and
queue), ``index_file`` (the message-key index), ``dispatch`` and ``dispatch_process`` (the reput: CommitLog ->
ConsumeQueue + IndexFile, in a child process by default), ``mapped_file`` (fixed-size mapped files), ``flush`` (flush
and retention services), ``recovery`` and ``checkpoint`` (restart after a crash), ``layout`` (the store's own byte
layouts; the record's is ``broker.common.record``), ``results`` (outcomes as values), ``config``
(MessageStoreConfig, BrokerRole).

May import: ``broker.common`` only. The store is synchronous (no asyncio) and knows nothing of requests, topics'
metadata or clients. This face re-exports nothing.
"""
