"""rmq's RocketMQ: the broker, its store, the NameServer, the client and the admin tools, in rooms named after
Apache RocketMQ's modules. Each room's docstring says what lives there and what it may import.

    common     message vocabulary, the CommitLog record layout, topic settings, names, errors   (imports nothing
               of rmq but ``remoting.codes``, a leaf table)
    remoting   the wire: codes, frames, commands, headers, JSON bodies, the sans-IO exchange; asyncio connection,
               client and server                                                               (imports common)
    store      CommitLog, ConsumeQueue, IndexFile, dispatch, flush, recovery                   (imports common)
    dledger    the CommitLog as a DLedger (Raft) log: entries, index, recovery, the record adapter; the members'
               RPC and leader election                                       (imports common, store, remoting)
    metrics    Prometheus metrics under Apache RocketMQ 5's names, for the broker and the NameServer
                                                                                         (imports common, remoting)
    server     the broker daemon (``mqbroker``): controller, processors, metadata, schedule, transactions, filters
                                                                       (imports common, remoting, store, metrics)
    namesrv    the NameServer (``mqnamesrv``)                                   (imports common, remoting, metrics)
    client     the client SDK: producers, consumers, and the blocking client Spark executors use
                                                                                         (imports common, remoting)
    tools      ``mqadmin`` and the local cluster the jobs and tests start          (imports common, remoting, client)
    console    ``mqconsole``, the web console                              (imports common, remoting, client, tools)

Package ``__init__`` files only re-export: importing ``broker.client`` loads no server, store or NameServer code.
``python -m broker`` starts a broker (``mqbroker``).
"""
