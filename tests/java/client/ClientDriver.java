/*
 * The official Apache RocketMQ Java client (rocketmq-client + rocketmq-tools) as a command-line driver for the tests.
 *
 * Every subcommand prints JSON lines to stdout: one per result (a sent or consumed message, a queue, a route) and,
 * for produce/consume/query commands, a final {"summary": "<command>", ...} line. A failure prints
 * {"error": "..."} and exits 1. Library noise never reaches stdout: System.out is redirected to stderr before any
 * RocketMQ class loads, and only this driver writes to the real stdout.
 *
 *   produce and consume-pull also take [--access-key AK --secret-key SK]: the client signs its requests
 *                (AclClientRPCHook) for a broker with ACL 1.0 or 2.0 on
 *   acl-calls    --namesrv A --topic T --group G [--admin-topic T2] [--access-key AK --secret-key SK]: a send, a pull,
 *                an offset commit and a topic creation (T2) signed by one client, one {"call", "code", "remark"}
 *                record each (see AclCalls)
 *   produce      --namesrv A --topic T [--count N] [--size B] [--body-prefix P] [--tag X] [--keys-prefix K]
 *                [--mode sync|async|oneway|batch] [--batch 16] [--group G] [--queue Q] [--property k=v]...
 *                [--delay-level L] [--compress-over BYTES] [--timeout-ms MS] [--trace true] [--trace-topic T]
 *                failover tests (sync mode): [--keep-going true] records a failed send as {"index", "sendFailure"}
 *                and goes on, [--pause-ms MS] between sends, [--poll-namesrv-ms MS] (pollNameServerInterval: how
 *                soon the producer's route follows a new master)
 *   produce-tx   --namesrv A --topic T --listener commit|rollback|unknown-then-commit|unknown [--count N] [--size B]
 *                [--body-prefix P] [--tag X] [--keys-prefix K] [--group G] [--property k=v]... [--timeout-ms MS]
 *                [--settle-ms MS] [--await-checks N]: a TransactionMQProducer whose executeLocalTransaction answers
 *                COMMIT_MESSAGE, ROLLBACK_MESSAGE or UNKNOW and whose checkLocalTransaction answers COMMIT_MESSAGE
 *                (ROLLBACK_MESSAGE for rollback, UNKNOW for unknown); it stays up until --await-checks distinct
 *                transactions were checked (default: --count with unknown-then-commit, else 0), then --settle-ms
 *                (default 500 with unknown-then-commit, else 0) for the END_TRANSACTION to go out. --count 0 makes a
 *                producer that only answers checks (after a broker restart). One record per send (with
 *                "localTransactionState" and "transactionId"), then one {"check": transactionId, ...} per check
 *                (each sent record carries "sentAtMs", when the send returned: delayed sends are timed from it)
 *   consume-pull --namesrv A --topic T [--group G] [--from earliest|offsets|committed] [--offsets q:o,q:o] [--queue Q]
 *                [--max N] [--timeout-ms MS] [--commit false] [--body-format base64|utf8|none]; --commit true
 *                auto-commits and, before the shutdown, commits the offset after the last message printed on each
 *                queue. earliest and offsets seek (assigned and paused before the start, see seekPaused: about
 *                1 s slower), committed does not (the group's offsets, or where a new group starts). A message
 *                before the offset expected next on its queue is dropped and counted in the summary's "stale"
 *   consume-push --namesrv A --topic T --group G --max N [--timeout-ms MS] [--instance-name X] [--tag-expr *]
 *                [--orderly false] [--heartbeat-ms MS] (push consumers: see heartbeat() for why a test shortens it)
 *                [--trace true] [--trace-topic T] (message trace, as for produce)
 *   filters and ordered messages (issue 4): consume-push and push-start take --sql EXPR (MessageSelector.bySql) or
 *                --tag EXPR (MessageSelector.byTag) instead of --tag-expr; push-start --orderly true registers a
 *                MessageListenerOrderly (each record gets "seq", one counter for the whole JVM, so deliveries of
 *                several consumers can be put in order) and --suspend-every N answers SUSPEND_CURRENT_QUEUE_A_MOMENT
 *                once to each message whose body index is a multiple of N; produce takes --tag-cycle A,B,C (message
 *                i gets tag i mod 3), --property-seq NAME (property NAME = i) and --shard-keys K with --mode ordered
 *                (message i gets property "orderKey" = key(i mod K) and goes to the queue SelectMessageQueueByHash
 *                picks for it)
 *   query-key    --namesrv A --topic T --key K [--max 32]
 *   query-id     --namesrv A --topic T (--id UNIQ_ID | --offset-id OFFSET_MSG_ID)
 *   route        --namesrv A --topic T
 *   cluster      --namesrv A [--wait-brokers N] [--timeout-ms MS]
 *   create-topic --namesrv A --topic T [--cluster C] [--queues N] [--perm 6] [--timeout-ms MS]
 *   offsets      --namesrv A --topic T
 *   consumer-progress --namesrv A --group G --topic T [--wait-consumed N] [--timeout-ms MS]: the group's
 *                offsets on every queue of T (examineConsumeStats), one {"queueId", "brokerOffset", "consumerOffset"}
 *                each; with --wait-consumed, asked again until the consumer offsets add up to N (or the timeout)
 *   send-raw     --namesrv A --topic T [--queue 0] [--group G] [--timeout-ms MS]: one SEND_MESSAGE(_V2) straight
 *                through MQClientAPIImpl to the first master of the cluster, skipping the client's own topic checks
 *                and retries, so the broker's answer shows: a {"code", "remark"} record or the send result
 *   push-start   --namesrv A --topic T --group G --name N [--instance-name X] [--tag-expr *] [--heartbeat-ms MS]:
 *                a push consumer (clustering, concurrently) that keeps running in this JVM and buffers what it receives, each
 *                message with "receivedAtMs"; [--listener reconsume-later] answers RECONSUME_LATER to every
 *                delivery (retries through %RETRY%G, then %DLQ%G), [--max-reconsume-times N] sets the consumer's
 *                maxReconsumeTimes, [--delay-level-when-next-consume L] the retry's delay level
 *   push-balance --names a,b --topic-queues Q [--timeout-ms MS]: waits until the named consumers split the topic's
 *                Q queues between them (each owns at least one, none shared); one {"consumer", "queues"} each
 *   push-await   --names a,b --count N [--settle-ms MS] [--timeout-ms MS]: waits until they received N messages
 *                in all (since push-start), waits --settle-ms more (duplicates show up), then emits and clears
 *                what they buffered, each message with its "consumer"
 *   push-stop    --name N: shuts the consumer down (its offsets are persisted, it unregisters) and emits what it
 *                still had buffered
 *   push-suspend / push-resume --name N: DefaultMQPushConsumer.suspend() / resume(): no new pulls while suspended
 *                (a pull already held by the broker still comes back with what arrives)
 *   push-start for master/slave tests: [--poll-namesrv-ms MS] (pollNameServerInterval: how soon the consumer sees a
 *                master leave or come back), [--persist-offset-ms MS] (persistConsumerOffsetInterval),
 *                [--pull-batch-size N], [--pull-threshold-for-queue N]
 *   script       reads one command per stdin line (whitespace separated, or a JSON array of strings) and runs
 *                them all in this JVM; each command's output ends with {"done": "<command>", "ok": ..., ...}.
 *
 * Global flags (anywhere on the command line; in script mode only on the command line itself, because the
 * client reads them once into static fields): --serialize JSON|ROCKETMQ sets rocketmq.serialize.type,
 * --smart-msg true|false sets org.apache.rocketmq.client.sendSmartMsg (SEND_MESSAGE_V2, the client's default is
 * true), --log-root DIR sets rocketmq.log.root and user.home so the client writes nothing under ~.
 *
 * A failed command's {"error"} line carries "code" when the exception has a response code (MQClientException,
 * MQBrokerException), and "causeCode" likewise for its cause.
 *
 * Body of message i: UTF-8 of "<body-prefix>-<i>|" padded with 'x' up to --size bytes (cut to --size when longer);
 * tests/apache/client.py's driver_body() is the Python twin. What is word for word the same in this driver and
 * ClientDriver49 (the command line, script mode, error records, bodies, client shutdown) lives in tests/java/common.
 */

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.selector.SelectMessageQueueByHash;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.common.topic.TopicValidator;
import org.apache.rocketmq.common.sysflag.PullSysFlag;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public final class ClientDriver {
    private static final long SHUTDOWN_AWAIT_MS = 3_000;
    private ClientDriver() {
    }

    /** The shared main (tests/java/common/DriverMain.java) with fastjson2 and this driver's commands. */
    public static void main(String[] argv) {
        DriverMain.run(argv, new DriverMain.Json() {
            @Override
            public String write(Map<String, ?> record) {
                return JSON.toJSONString(record, JSONWriter.Feature.WriteNulls,
                    JSONWriter.Feature.WriteNonStringKeyAsString);
            }

            @Override
            public String[] strings(String array) {
                return JSON.parseArray(array).toArray(new String[0]);
            }
        }, global -> { }, ClientDriver::dispatch);
    }

    /** --access-key AK --secret-key SK: the client signs every request (AclClientRPCHook, ACL 2.0); else no hook. */
    static RPCHook rpcHook(Args args) {
        String accessKey = args.get("access-key", null);
        return accessKey == null ? null
            : new AclClientRPCHook(new SessionCredentials(accessKey, args.require("secret-key")));
    }

    private static void dispatch(Args args) throws Exception {
        switch (args.command) {
            case "produce":
                Produce.run(args);
                break;
            case "produce-tx":
                ProduceTx.run(args);
                break;
            case "consume-pull":
                ConsumePull.run(args);
                break;
            case "consume-push":
                ConsumePush.run(args);
                break;
            case "query-key":
                Admin.queryKey(args);
                break;
            case "query-id":
                Admin.queryId(args);
                break;
            case "route":
                Admin.route(args);
                break;
            case "cluster":
                Admin.cluster(args);
                break;
            case "create-topic":
                Admin.createTopic(args);
                break;
            case "offsets":
                Admin.offsets(args);
                break;
            case "consumer-progress":
                Admin.consumerProgress(args);
                break;
            case "acl-calls":
                AclCalls.run(args, rpcHook(args), instanceName(args, "acl"), new AclHeaders());
                break;
            case "send-raw":
                RawSend.run(args);
                break;
            case "push-start":
                PushPool.start(args);
                break;
            case "push-balance":
                PushPool.balance(args);
                break;
            case "push-await":
                PushPool.await(args);
                break;
            case "push-stop":
                PushPool.stop(args);
                break;
            case "push-suspend":
                PushPool.member(args).consumer.suspend();
                break;
            case "push-resume":
                PushPool.member(args).consumer.resume();
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args.command);
        }
    }

    // ---------------------------------------------------------------- output

    static void emit(Map<String, ?> record) {
        DriverMain.emit(record);
    }

    static JSONObject summary(String command) {
        JSONObject s = new JSONObject();
        s.put("summary", command);
        return s;
    }

    static JSONObject message(MessageExt m, String bodyFormat) {
        JSONObject j = new JSONObject();
        j.put("topic", m.getTopic());
        j.put("brokerName", m.getBrokerName());
        j.put("queueId", m.getQueueId());
        j.put("queueOffset", m.getQueueOffset());
        j.put("msgId", m.getMsgId());
        j.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId());
        j.put("uniqKey", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
        j.put("keys", m.getKeys());
        j.put("tags", m.getTags());
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        j.put("bodyLength", body.length);
        if ("base64".equals(bodyFormat)) {
            j.put("body", Base64.getEncoder().encodeToString(body));
        } else if ("utf8".equals(bodyFormat)) {
            j.put("body", new String(body, StandardCharsets.UTF_8));
        }
        j.put("properties", new TreeMap<>(m.getProperties()));
        j.put("flag", m.getFlag());
        j.put("sysFlag", m.getSysFlag());
        j.put("bodyCRC", m.getBodyCRC());
        j.put("storeSize", m.getStoreSize());
        j.put("commitLogOffset", m.getCommitLogOffset());
        j.put("bornTimestamp", m.getBornTimestamp());
        j.put("bornHost", m.getBornHostString() + ":" + port(m.getBornHost()));
        j.put("storeTimestamp", m.getStoreTimestamp());
        j.put("storeHost", m.getStoreHost() == null ? null : m.getStoreHost().toString().replaceFirst("^[^/]*/", ""));
        j.put("reconsumeTimes", m.getReconsumeTimes());
        j.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        return j;
    }

    private static int port(java.net.SocketAddress addr) {
        return addr instanceof java.net.InetSocketAddress ? ((java.net.InetSocketAddress) addr).getPort() : -1;
    }

    static void close(Runnable shutdown) {
        DriverMain.close(shutdown);
    }

    /**
     * --heartbeat-ms: the consumer's heartbeat interval (default 30 s). A rebalance raises the subscription version
     * and sends a heartbeat only if no other heartbeat holds the lock; until one carries the new version, the broker
     * answers the new queues' pulls SUBSCRIPTION_NOT_LATEST (Apache's broker as ours), for up to 30 s.
     */
    /** --trace true: message trace on (ClientConfig.enableTrace), to --trace-topic or RMQ_SYS_TRACE_TOPIC. */
    static void trace(org.apache.rocketmq.client.ClientConfig client, Args args) {
        client.setEnableTrace(Boolean.parseBoolean(args.get("trace", "false")));
        client.setTraceTopic(args.get("trace-topic", null));
    }

    static void heartbeat(DefaultMQPushConsumer consumer, Args args) {
        if (args.has("heartbeat-ms")) {
            consumer.setHeartbeatBrokerInterval(args.getInt("heartbeat-ms", 30_000));
        }
        // A shutdown persists the offsets right after stopping the consume threads, without waiting for them by
        // default: the offset of a batch still in its listener would be lost (and consumed again next time).
        consumer.setAwaitTerminationMillisWhenShutdown(SHUTDOWN_AWAIT_MS);
    }

    static String instanceName(Args args, String kind) {
        return args.get("instance-name", DriverMain.uniqueName("driver-" + kind));
    }

    // ---------------------------------------------------------------- produce

    static final class Produce {
        static void run(Args args) throws Exception {
            String topic = args.require("topic");
            int count = args.getInt("count", 1);
            String mode = args.get("mode", "sync");
            long timeout = args.getLong("timeout-ms", 10_000);
            List<Message> messages = build(args, topic, count);
            DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "driver_producer_group"),
                rpcHook(args));
            producer.setNamesrvAddr(args.require("namesrv"));
            producer.setInstanceName(instanceName(args, "producer"));
            producer.setClientIP("127.0.0.1");
            producer.setSendMsgTimeout((int) timeout);
            producer.setCompressMsgBodyOverHowmuch(args.getInt("compress-over", 4 * 1024));
            producer.setRetryTimesWhenSendFailed(args.getInt("retries", 2));
            producer.setRetryTimesWhenSendAsyncFailed(args.getInt("retries", 2));
            if (args.has("poll-namesrv-ms")) {
                producer.setPollNameServerInterval(args.getInt("poll-namesrv-ms", 30_000));
            }
            trace(producer, args);
            producer.start();
            long start = System.nanoTime();
            try {
                Integer queue = args.has("queue") ? args.getInt("queue", 0) : null;
                switch (mode) {
                    case "sync":
                        boolean keepGoing = Boolean.parseBoolean(args.get("keep-going", "false"));
                        long pauseMs = args.getLong("pause-ms", 0);
                        for (int i = 0; i < messages.size(); i++) {
                            Message m = messages.get(i);
                            try {
                                emitSent(i, m, queue == null ? producer.send(m, timeout) : producer.send(m, Queues.target(producer, topic, queue), timeout));
                            } catch (Exception e) {
                                if (!keepGoing) {
                                    throw e;
                                }
                                JSONObject failed = new JSONObject();
                                failed.put("index", i);
                                failed.put("sendFailure", String.valueOf(e));
                                emit(failed);
                            }
                            if (pauseMs > 0) {
                                Thread.sleep(pauseMs);
                            }
                        }
                        break;
                    case "async":
                        sendAsync(producer, messages, topic, queue, timeout);
                        break;
                    case "oneway":
                        for (Message m : messages) {
                            if (queue == null) {
                                producer.sendOneway(m);
                            } else {
                                producer.sendOneway(m, Queues.target(producer, topic, queue));
                            }
                        }
                        break;
                    case "batch":
                        sendBatches(producer, messages, topic, queue, args.getInt("batch", 16), timeout);
                        break;
                    case "ordered":  // issue 4: by sharding key
                        for (int i = 0; i < messages.size(); i++) {
                            Message m = messages.get(i);
                            emitSent(i, m, producer.send(m, new SelectMessageQueueByHash(), m.getUserProperty(
                                "orderKey"), timeout));
                        }
                        break;
                    default:
                        throw new IllegalArgumentException("unknown --mode " + mode);
                }
            } finally {
                close(producer::shutdown);
            }
            JSONObject s = summary("produce");
            s.put("mode", mode);
            s.put("count", messages.size());
            s.put("elapsedMs", (System.nanoTime() - start) / 1_000_000);
            emit(s);
        }

        private static List<Message> build(Args args, String topic, int count) {
            int size = args.getInt("size", 16);
            String prefix = args.get("body-prefix", "body");
            String tag = args.get("tag", null);
            String keysPrefix = args.get("keys-prefix", null);
            int delayLevel = args.getInt("delay-level", 0);
            List<String[]> props = new ArrayList<>();
            for (String kv : args.all("property")) {
                int eq = kv.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("--property wants k=v, got " + kv);
                }
                props.add(new String[] {kv.substring(0, eq), kv.substring(eq + 1)});
            }
            List<Message> messages = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, DriverMain.body(prefix, i, size));
                if (tag != null) {
                    m.setTags(tag);
                }
                if (keysPrefix != null) {
                    m.setKeys(keysPrefix + i);
                }
                if (delayLevel > 0) {
                    m.setDelayTimeLevel(delayLevel);
                }
                for (String[] kv : props) {
                    m.putUserProperty(kv[0], kv[1]);
                }
                filterAndOrderProperties(args, m, i);
                messages.add(m);
            }
            return messages;
        }

        /** Issue 4: --tag-cycle, --property-seq and --shard-keys (see the header comment). */
        private static void filterAndOrderProperties(Args args, Message m, int i) {
            String cycle = args.get("tag-cycle", null);
            if (cycle != null) {
                String[] tags = cycle.split(",");
                m.setTags(tags[i % tags.length]);
            }
            for (String name : args.all("property-seq")) {
                m.putUserProperty(name, String.valueOf(i));
            }
            int shards = args.getInt("shard-keys", 0);
            if (shards > 0) {
                m.putUserProperty("orderKey", "key" + (i % shards));
            }
        }

        private static void emitSent(int index, Message m, SendResult r) {
            emitSent(index, m, r.getSendStatus().name(), r.getMsgId(), r.getOffsetMsgId(), r.getMessageQueue(),
                r.getQueueOffset(), r);
        }

        private static void emitSent(int index, Message m, String status, String msgId, String offsetMsgId,
            MessageQueue mq, long queueOffset, SendResult r) {
            JSONObject j = new JSONObject();
            j.put("index", index);
            j.put("sendStatus", status);
            j.put("msgId", msgId);
            j.put("offsetMsgId", offsetMsgId);
            j.put("topic", mq.getTopic());
            j.put("brokerName", mq.getBrokerName());
            j.put("queueId", mq.getQueueId());
            j.put("queueOffset", queueOffset);
            j.put("keys", m.getKeys());
            j.put("tags", m.getTags());
            j.put("bodyLength", m.getBody().length);
            j.put("regionId", r.getRegionId());
            j.put("traceOn", r.isTraceOn());
            j.put("sentAtMs", System.currentTimeMillis());
            emit(j);
        }

        private static void sendAsync(DefaultMQProducer producer, List<Message> messages, String topic,
            Integer queue, long timeout) throws Exception {
            int n = messages.size();
            SendResult[] results = new SendResult[n];
            Throwable[] failures = new Throwable[n];
            CountDownLatch latch = new CountDownLatch(n);
            MessageQueue mq = queue == null ? null : Queues.target(producer, topic, queue);
            for (int i = 0; i < n; i++) {
                final int index = i;
                SendCallback callback = new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        results[index] = r;
                        latch.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        failures[index] = e;
                        latch.countDown();
                    }
                };
                if (mq == null) {
                    producer.send(messages.get(i), callback, timeout);
                } else {
                    producer.send(messages.get(i), mq, callback, timeout);
                }
            }
            if (!latch.await(timeout + 5_000, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("async sends did not all complete in " + timeout + " ms");
            }
            for (int i = 0; i < n; i++) {
                if (failures[i] != null) {
                    throw new IllegalStateException("async send " + i + " failed", failures[i]);
                }
                emitSent(i, messages.get(i), results[i]);
            }
        }

        private static void sendBatches(DefaultMQProducer producer, List<Message> messages, String topic,
            Integer queue, int batchSize, long timeout) throws Exception {
            MessageQueue mq = queue == null ? null : Queues.target(producer, topic, queue);
            for (int from = 0; from < messages.size(); from += batchSize) {
                List<Message> batch = messages.subList(from, Math.min(messages.size(), from + batchSize));
                SendResult r = mq == null ? producer.send(batch, timeout) : producer.send(batch, mq, timeout);
                String[] ids = r.getMsgId().split(",");
                String[] offsetIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
                for (int j = 0; j < batch.size(); j++) {
                    emitSent(from + j, batch.get(j), r.getSendStatus().name(), j < ids.length ? ids[j] : null,
                        j < offsetIds.length ? offsetIds[j] : null, r.getMessageQueue(), r.getQueueOffset() + j, r);
                }
            }
        }
    }

    // ---------------------------------------------------------------- produce-tx (transactions)

    static final class ProduceTx {
        static void run(Args args) throws Exception {
            String topic = args.require("topic");
            String mode = args.require("listener");
            long timeout = args.getLong("timeout-ms", 30_000);
            boolean thenCommit = "unknown-then-commit".equals(mode);
            long settle = args.getLong("settle-ms", thenCommit ? 500 : 0);
            List<Message> messages = Produce.build(args, topic, args.getInt("count", 1));
            int awaitChecks = args.getInt("await-checks", thenCommit ? messages.size() : 0);
            Listener listener = new Listener(mode);
            TransactionMQProducer producer = new TransactionMQProducer(args.get("group", "driver_tx_group"));
            producer.setNamesrvAddr(args.require("namesrv"));
            producer.setInstanceName(instanceName(args, "tx"));
            producer.setClientIP("127.0.0.1");
            producer.setSendMsgTimeout((int) Math.min(timeout, Integer.MAX_VALUE));
            producer.setTransactionListener(listener);
            producer.start();
            long start = System.nanoTime();
            List<JSONObject> sent = new ArrayList<>();
            boolean timedOut = false;
            try {
                for (int i = 0; i < messages.size(); i++) {
                    Message m = messages.get(i);
                    TransactionSendResult r = producer.sendMessageInTransaction(m, i);
                    JSONObject j = new JSONObject();
                    j.put("index", i);
                    j.put("sendStatus", r.getSendStatus().name());
                    j.put("localTransactionState", r.getLocalTransactionState().name());
                    j.put("msgId", r.getMsgId());
                    j.put("offsetMsgId", r.getOffsetMsgId());
                    j.put("transactionId", r.getTransactionId());
                    j.put("topic", r.getMessageQueue().getTopic());
                    j.put("brokerName", r.getMessageQueue().getBrokerName());
                    j.put("queueId", r.getMessageQueue().getQueueId());
                    j.put("queueOffset", r.getQueueOffset());
                    j.put("keys", m.getKeys());
                    sent.add(j);
                }
                long deadline = System.currentTimeMillis() + timeout;
                while (listener.checkedIds.size() < awaitChecks && System.currentTimeMillis() < deadline) {
                    Thread.sleep(20);
                }
                timedOut = listener.checkedIds.size() < awaitChecks;
                Thread.sleep(settle);
            } finally {
                close(producer::shutdown);
            }
            for (JSONObject j : sent) {
                emit(j);
            }
            for (JSONObject c : listener.checks) {
                emit(c);
            }
            JSONObject s = summary("produce-tx");
            s.put("listener", mode);
            s.put("count", sent.size());
            s.put("checks", listener.checks.size());
            s.put("checked", listener.checkedIds.size());
            s.put("executed", listener.executed.get());
            s.put("timedOut", timedOut);
            s.put("elapsedMs", (System.nanoTime() - start) / 1_000_000);
            emit(s);
        }

        static final class Listener implements TransactionListener {
            final String mode;
            final AtomicInteger executed = new AtomicInteger();
            final List<JSONObject> checks = java.util.Collections.synchronizedList(new ArrayList<>());
            final java.util.Set<String> checkedIds = ConcurrentHashMap.newKeySet();

            Listener(String mode) {
                if (!List.of("commit", "rollback", "unknown-then-commit", "unknown").contains(mode)) {
                    throw new IllegalArgumentException("unknown --listener " + mode);
                }
                this.mode = mode;
            }

            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                executed.incrementAndGet();
                switch (mode) {
                    case "commit":
                        return LocalTransactionState.COMMIT_MESSAGE;
                    case "rollback":
                        return LocalTransactionState.ROLLBACK_MESSAGE;
                    default:
                        return LocalTransactionState.UNKNOW;
                }
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                LocalTransactionState state;
                switch (mode) {
                    case "unknown":
                        state = LocalTransactionState.UNKNOW;
                        break;
                    case "rollback":
                        state = LocalTransactionState.ROLLBACK_MESSAGE;
                        break;
                    default:
                        state = LocalTransactionState.COMMIT_MESSAGE;
                }
                JSONObject c = message(msg, "utf8");
                c.put("check", msg.getTransactionId());
                c.put("answer", state.name());
                c.put("atMs", System.currentTimeMillis());
                checks.add(c);
                checkedIds.add(msg.getTransactionId());
                return state;
            }
        }
    }

    // ---------------------------------------------------------------- consume

    static final class ConsumePull {
        static void run(Args args) throws Exception {
            String namesrv = args.require("namesrv");
            String topic = args.require("topic");
            int max = args.getInt("max", -1);
            long timeout = args.getLong("timeout-ms", 15_000);
            String bodyFormat = args.get("body-format", "base64");
            String from = args.get("from", "earliest");
            if (!List.of("earliest", "offsets", "committed").contains(from)) {
                throw new IllegalArgumentException("unknown --from " + from);
            }
            DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(args.get("group", "driver_pull_group"),
                rpcHook(args));
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName(instanceName(args, "pull"));
            consumer.setClientIP("127.0.0.1");
            consumer.setAutoCommit(Boolean.parseBoolean(args.get("commit", "false")));
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setPullBatchSize(args.getInt("pull-batch", 32));
            consumer.setPollTimeoutMillis(500);
            long start = System.nanoTime();
            int got = 0;
            int stale = 0;
            boolean timedOut = false;
            try {
                Admin.QueueStates states = "committed".equals(from) && max >= 0 ? null : Admin.queueStates(namesrv, topic);
                // The next offset expected per queue: a message before it is dropped and counted as "stale" (a
                // safety net: the seeking below leaves the client no stale batch to hand out).
                Map<MessageQueue, Long> next = new HashMap<>();
                List<MessageQueue> queues;
                if ("committed".equals(from)) {
                    consumer.start();
                    queues = Queues.selected(consumer.fetchMessageQueues(topic), args);
                    consumer.assign(queues);
                } else {
                    queues = Queues.selected(states.queues, args);
                    next = seekPaused(consumer, queues, targets(args, from, queues, states));
                }
                Map<MessageQueue, Long> ends = max < 0 ? states.max : null;
                long deadline = System.currentTimeMillis() + timeout;
                while (max < 0 ? !reached(next, ends, queues) : got < max) {
                    long left = deadline - System.currentTimeMillis();
                    if (left <= 0) {
                        timedOut = true;
                        break;
                    }
                    for (MessageExt m : consumer.poll(Math.min(left, 500))) {
                        if (max >= 0 && got >= max) {
                            break;
                        }
                        MessageQueue mq = new MessageQueue(m.getTopic(), m.getBrokerName(), m.getQueueId());
                        if (m.getQueueOffset() < next.getOrDefault(mq, Long.MIN_VALUE)) {
                            stale++;
                            continue;
                        }
                        emit(message(m, bodyFormat));
                        got++;
                        next.put(mq, m.getQueueOffset() + 1);
                    }
                }
                if (consumer.isAutoCommit() && !next.isEmpty()) {
                    // Auto-commit runs at most every 5 s, inside poll, and commits what the client handed out: commit
                    // the offset after the last message emitted, and persist it.
                    consumer.commit(next, true);
                }
            } finally {
                close(consumer::shutdown);
            }
            JSONObject s = summary("consume-pull");
            s.put("count", got);
            s.put("stale", stale);
            s.put("timedOut", timedOut);
            s.put("elapsedMs", (System.nanoTime() - start) / 1_000_000);
            emit(s);
        }

        /** Where to seek each queue: its min offset (earliest), or --offsets q:o,... (the rest at their min). */
        private static Map<MessageQueue, Long> targets(Args args, String from, List<MessageQueue> queues,
            Admin.QueueStates states) {
            Map<Integer, Long> offsets = new HashMap<>();
            if ("offsets".equals(from)) {
                for (String pair : args.require("offsets").split(",")) {
                    String[] qo = pair.split(":");
                    offsets.put(Integer.parseInt(qo[0]), Long.parseLong(qo[1]));
                }
            }
            Map<MessageQueue, Long> targets = new LinkedHashMap<>();
            for (MessageQueue mq : queues) {
                targets.put(mq, offsets.getOrDefault(mq.getQueueId(), states.min.get(mq)));
            }
            return targets;
        }

        /**
         * assign + seek without the client's two races. assign() on a running consumer starts a pull task per
         * queue; seek() then cancels it with Thread.interrupt() on whatever thread last ran it, and an interrupted
         * RPC makes the client close the broker connection, failing every request on it; and a batch that old task
         * pulled from the old position can still be handed out after the seek (DefaultLitePullConsumerImpl.seek
         * and PullTaskImpl). So the queues are assigned and paused before start(): the first tasks find them
         * paused and pull nothing; the seeks run; then the queues resume (a task that saw them paused looks again
         * after 1 s). Returns the sought offsets.
         */
        private static Map<MessageQueue, Long> seekPaused(DefaultLitePullConsumer consumer, List<MessageQueue> queues,
            Map<MessageQueue, Long> targets) throws Exception {
            consumer.assign(queues);
            consumer.pause(queues);
            consumer.start();
            for (Map.Entry<MessageQueue, Long> t : targets.entrySet()) {
                consumer.seek(t.getKey(), t.getValue());
            }
            consumer.resume(queues);
            return new HashMap<>(targets);
        }

        /** Drain mode: done once every queue has been read up to the max offset it had when we started. */
        private static boolean reached(Map<MessageQueue, Long> next, Map<MessageQueue, Long> ends,
            List<MessageQueue> queues) {
            for (MessageQueue mq : queues) {
                long end = ends.getOrDefault(mq, 0L);
                if (end > 0 && next.getOrDefault(mq, 0L) < end) {
                    return false;
                }
            }
            return true;
        }
    }

    static final class ConsumePush {
        static void run(Args args) throws Exception {
            int max = args.getInt("max", 1);
            long timeout = args.getLong("timeout-ms", 30_000);
            String bodyFormat = args.get("body-format", "base64");
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.require("group"));
            consumer.setNamesrvAddr(args.require("namesrv"));
            consumer.setInstanceName(instanceName(args, "push"));
            consumer.setClientIP("127.0.0.1");
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            heartbeat(consumer, args);
            trace(consumer, args);
            subscribe(consumer, args.require("topic"), args);
            AtomicInteger got = new AtomicInteger();
            CountDownLatch enough = new CountDownLatch(1);
            if (Boolean.parseBoolean(args.get("orderly", "false"))) {
                consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                    accept(msgs, got, max, enough, bodyFormat);
                    return ConsumeOrderlyStatus.SUCCESS;
                });
            } else {
                consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                    accept(msgs, got, max, enough, bodyFormat);
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
            }
            long start = System.nanoTime();
            consumer.start();
            boolean done;
            try {
                done = enough.await(timeout, TimeUnit.MILLISECONDS);
            } finally {
                close(consumer::shutdown);
            }
            JSONObject s = summary("consume-push");
            s.put("count", Math.min(got.get(), max));
            s.put("timedOut", !done);
            s.put("elapsedMs", (System.nanoTime() - start) / 1_000_000);
            emit(s);
        }

        private static void accept(List<MessageExt> msgs, AtomicInteger got, int max, CountDownLatch enough,
            String bodyFormat) {
            for (MessageExt m : msgs) {
                int n = got.incrementAndGet();
                if (n <= max) {
                    emit(message(m, bodyFormat));
                }
                if (n >= max) {
                    enough.countDown();
                }
            }
        }
    }

    // ---------------------------------------------------------------- admin

    static final class Admin {
        private static DefaultMQAdminExt start(String namesrv, String kind) throws Exception {
            DefaultMQAdminExt admin = new DefaultMQAdminExt();
            admin.setNamesrvAddr(namesrv);
            admin.setInstanceName(DriverMain.uniqueName("driver-admin-" + kind));
            admin.setClientIP("127.0.0.1");
            admin.start();
            return admin;
        }

        /** A topic's readable queues (as fetchMessageQueues builds them from the route) with min and max offsets. */
        static final class QueueStates {
            final List<MessageQueue> queues = new ArrayList<>();
            final Map<MessageQueue, Long> min = new HashMap<>();
            final Map<MessageQueue, Long> max = new HashMap<>();
        }

        static QueueStates queueStates(String namesrv, String topic) throws Exception {
            DefaultMQAdminExt admin = start(namesrv, "queues");
            try {
                QueueStates states = new QueueStates();
                for (QueueData qd : admin.examineTopicRouteInfo(topic).getQueueDatas()) {
                    if (!PermName.isReadable(qd.getPerm())) {
                        continue;
                    }
                    for (int i = 0; i < qd.getReadQueueNums(); i++) {
                        MessageQueue mq = new MessageQueue(topic, qd.getBrokerName(), i);
                        states.queues.add(mq);
                        states.min.put(mq, admin.minOffset(mq));
                        states.max.put(mq, admin.maxOffset(mq));
                    }
                }
                return states;
            } finally {
                close(admin::shutdown);
            }
        }

        static Map<MessageQueue, Long> maxOffsets(String namesrv, Collection<MessageQueue> queues) throws Exception {
            DefaultMQAdminExt admin = start(namesrv, "offsets");
            try {
                Map<MessageQueue, Long> ends = new HashMap<>();
                for (MessageQueue mq : queues) {
                    ends.put(mq, admin.maxOffset(mq));
                }
                return ends;
            } finally {
                close(admin::shutdown);
            }
        }

        static void queryKey(Args args) throws Exception {
            DefaultMQAdminExt admin = start(args.require("namesrv"), "query");
            try {
                String topic = args.require("topic");
                String key = args.require("key");
                int max = args.getInt("max", 32);
                emitQueryResult("query-key", orEmpty(() -> admin.queryMessage(topic, key, max, 0, Long.MAX_VALUE)), args);
            } finally {
                close(admin::shutdown);
            }
        }

        static void queryId(Args args) throws Exception {
            String topic = args.require("topic");
            DefaultMQAdminExt admin = start(args.require("namesrv"), "query");
            try {
                List<MessageExt> found = new ArrayList<>();
                if (args.has("offset-id")) {
                    // Decodes the store host from the id and asks that broker: only for offsetMsgIds.
                    MessageExt m = admin.viewMessage(topic, args.require("offset-id"));
                    if (m != null) {
                        found.add(m);
                    }
                } else {
                    // A client msgId (UNIQ_KEY) has the same length as an offsetMsgId, so viewMessage would
                    // misread it as a broker address: go straight to the index query by unique key.
                    String id = args.require("id");
                    int max = args.getInt("max", 32);
                    found.addAll(orEmpty(() -> admin.queryMessageByUniqKey(null, topic, id, max, 0, Long.MAX_VALUE)));
                }
                emitQueryResult("query-id", found, args);
            } finally {
                close(admin::shutdown);
            }
        }

        interface Query {
            QueryResult run() throws Exception;
        }

        /** The client reports "no message" as an exception (NO_MESSAGE); for us it is an empty result. */
        private static List<MessageExt> orEmpty(Query query) throws Exception {
            try {
                return query.run().getMessageList();
            } catch (MQClientException e) {
                if (e.getResponseCode() == ResponseCode.NO_MESSAGE) {
                    return List.of();
                }
                throw e;
            }
        }

        private static void emitQueryResult(String command, List<MessageExt> messages, Args args) {
            String bodyFormat = args.get("body-format", "base64");
            for (MessageExt m : messages) {
                emit(message(m, bodyFormat));
            }
            JSONObject s = summary(command);
            s.put("count", messages.size());
            emit(s);
        }

        static void route(Args args) throws Exception {
            DefaultMQAdminExt admin = start(args.require("namesrv"), "route");
            try {
                TopicRouteData route = admin.examineTopicRouteInfo(args.require("topic"));
                emit(JSON.parseObject(route.toJson()));
            } finally {
                close(admin::shutdown);
            }
        }

        static void cluster(Args args) throws Exception {
            int want = args.getInt("wait-brokers", 0);
            long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 10_000);
            DefaultMQAdminExt admin = start(args.require("namesrv"), "cluster");
            try {
                ClusterInfo info = admin.examineBrokerClusterInfo();
                while (info.getBrokerAddrTable().size() < want) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("only " + info.getBrokerAddrTable().size() + " of " + want
                            + " brokers registered");
                    }
                    Thread.sleep(100);
                    info = admin.examineBrokerClusterInfo();
                }
                emit(JSON.parseObject(info.toJson()));
            } finally {
                close(admin::shutdown);
            }
        }

        static void createTopic(Args args) throws Exception {
            String topic = args.require("topic");
            int queues = args.getInt("queues", 4);
            String cluster = args.get("cluster", null);
            long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 10_000);
            DefaultMQAdminExt admin = start(args.require("namesrv"), "topic");
            try {
                ClusterInfo info = admin.examineBrokerClusterInfo();
                Map<String, String> masters = new LinkedHashMap<>();
                for (BrokerData bd : info.getBrokerAddrTable().values()) {
                    if (cluster == null || cluster.equals(bd.getCluster())) {
                        masters.put(bd.getBrokerName(), bd.getBrokerAddrs().get(MixAll.MASTER_ID));
                    }
                }
                if (masters.isEmpty()) {
                    throw new IllegalStateException("no broker registered" + (cluster == null ? "" : " in " + cluster));
                }
                TopicConfig config = new TopicConfig(topic, queues, queues, args.getInt("perm", 6));
                for (String addr : masters.values()) {
                    admin.createAndUpdateTopicConfig(addr, config);
                }
                awaitRoute(admin, topic, masters.keySet(), queues, deadline);
                JSONObject j = new JSONObject();
                j.put("topic", topic);
                j.put("queues", queues);
                j.put("brokers", masters);
                emit(j);
            } finally {
                close(admin::shutdown);
            }
        }

        /** The broker registers the new topic with the namesrv on its own; wait until the route shows it. */
        private static void awaitRoute(DefaultMQAdminExt admin, String topic, Collection<String> brokers, int queues,
            long deadline) throws Exception {
            AtomicReference<Exception> last = new AtomicReference<>();
            while (System.currentTimeMillis() < deadline) {
                try {
                    TopicRouteData route = admin.examineTopicRouteInfo(topic);
                    int ready = 0;
                    for (QueueData qd : route.getQueueDatas()) {
                        if (brokers.contains(qd.getBrokerName()) && qd.getWriteQueueNums() == queues) {
                            ready++;
                        }
                    }
                    if (ready == brokers.size()) {
                        return;
                    }
                } catch (Exception e) {
                    last.set(e);
                }
                Thread.sleep(50);
            }
            throw new IllegalStateException("route of " + topic + " not visible on the namesrv in time", last.get());
        }

        static void consumerProgress(Args args) throws Exception {
            String group = args.require("group");
            String topic = args.require("topic");
            long wanted = args.getLong("wait-consumed", -1);
            long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 10_000);
            DefaultMQAdminExt admin = start(args.require("namesrv"), "progress");
            try {
                TreeMap<MessageQueue, OffsetWrapper> sorted;
                while (true) {
                    sorted = new TreeMap<>(admin.examineConsumeStats(group, topic).getOffsetTable());
                    long consumed = 0;
                    for (OffsetWrapper w : sorted.values()) {
                        consumed += Math.max(0, w.getConsumerOffset());
                    }
                    if (consumed >= wanted || System.currentTimeMillis() > deadline) {
                        break;
                    }
                    Thread.sleep(50);
                }
                for (Map.Entry<MessageQueue, OffsetWrapper> e : sorted.entrySet()) {
                    JSONObject j = new JSONObject();
                    j.put("topic", e.getKey().getTopic());
                    j.put("brokerName", e.getKey().getBrokerName());
                    j.put("queueId", e.getKey().getQueueId());
                    j.put("brokerOffset", e.getValue().getBrokerOffset());
                    j.put("consumerOffset", e.getValue().getConsumerOffset());
                    emit(j);
                }
            } finally {
                close(admin::shutdown);
            }
        }

        static void offsets(Args args) throws Exception {
            DefaultMQAdminExt admin = start(args.require("namesrv"), "offsets");
            try {
                TopicStatsTable stats = admin.examineTopicStats(args.require("topic"));
                TreeMap<MessageQueue, TopicOffset> sorted = new TreeMap<>(stats.getOffsetTable());
                for (Map.Entry<MessageQueue, TopicOffset> e : sorted.entrySet()) {
                    JSONObject j = new JSONObject();
                    j.put("brokerName", e.getKey().getBrokerName());
                    j.put("queueId", e.getKey().getQueueId());
                    j.put("minOffset", e.getValue().getMinOffset());
                    j.put("maxOffset", e.getValue().getMaxOffset());
                    j.put("lastUpdateTimestamp", e.getValue().getLastUpdateTimestamp());
                    emit(j);
                }
            } finally {
                close(admin::shutdown);
            }
        }
    }

    // ---------------------------------------------------------------- raw send

    /** One send past the client's checks and retries: what the broker answers a bad request, unfiltered. */
    static final class RawSend {
        static void run(Args args) throws Exception {
            String topic = args.require("topic");
            long timeout = args.getLong("timeout-ms", 10_000);
            String group = args.get("group", "driver_raw_group");
            DefaultMQProducer producer = new DefaultMQProducer(group);
            producer.setNamesrvAddr(args.require("namesrv"));
            producer.setInstanceName(instanceName(args, "raw"));
            producer.setClientIP("127.0.0.1");
            producer.start();
            try {
                var api = producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
                BrokerData broker = api.getBrokerClusterInfo(timeout).getBrokerAddrTable().values().iterator().next();
                String addr = broker.getBrokerAddrs().get(MixAll.MASTER_ID);
                Message msg = new Message(topic, DriverMain.body(args.get("body-prefix", "raw"), 0, args.getInt("size", 16)));
                MessageClientIDSetter.setUniqID(msg);
                SendMessageRequestHeader h = new SendMessageRequestHeader();
                h.setProducerGroup(group);
                h.setTopic(topic);
                h.setDefaultTopic(TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC);
                h.setDefaultTopicQueueNums(4);
                h.setQueueId(args.getInt("queue", 0));
                h.setSysFlag(0);
                h.setBornTimestamp(System.currentTimeMillis());
                h.setFlag(msg.getFlag());
                h.setProperties(MessageDecoder.messageProperties2String(msg.getProperties()));
                h.setReconsumeTimes(0);
                h.setUnitMode(false);
                h.setBatch(false);
                h.setBrokerName(broker.getBrokerName());
                JSONObject j = new JSONObject();
                try {
                    SendResult r = api.sendMessage(addr, broker.getBrokerName(), msg, h, timeout,
                        CommunicationMode.SYNC, null, producer.getDefaultMQProducerImpl());
                    j.put("sendStatus", r.getSendStatus().name());
                    j.put("queueId", r.getMessageQueue().getQueueId());
                    j.put("queueOffset", r.getQueueOffset());
                } catch (MQBrokerException e) {
                    j.put("code", e.getResponseCode());
                    j.put("remark", e.getErrorMessage());
                }
                emit(j);
            } finally {
                close(producer::shutdown);
            }
            emit(summary("send-raw"));
        }
    }

    // ---------------------------------------------------------------- ACL outcomes

    /** acl-calls (tests/java/common/AclCalls) with this client's request headers (5.x's remoting.protocol.header). */
    static final class AclHeaders implements AclCalls.Headers {
        @Override
        public String pull(MQClientAPIImpl api, String addr, String group, String topic, long timeout)
            throws Exception {
            PullMessageRequestHeader pull = new PullMessageRequestHeader();
            pull.setConsumerGroup(group);
            pull.setTopic(topic);
            pull.setQueueId(0);
            pull.setQueueOffset(0L);
            pull.setMaxMsgNums(1);
            // the subscription comes along; suspended until the send before it is in the queue (a broker
            // dispatches it to the ConsumeQueue after it answered the send)
            pull.setSysFlag(PullSysFlag.buildSysFlag(false, true, true, false));
            pull.setCommitOffset(0L);
            pull.setSuspendTimeoutMillis(timeout / 2);
            pull.setSubscription("*");
            pull.setSubVersion(0L);
            pull.setExpressionType("TAG");
            return api.pullMessage(addr, pull, timeout, CommunicationMode.SYNC, null).getPullStatus().name();
        }

        @Override
        public void commit(MQClientAPIImpl api, String addr, String group, String topic, long timeout)
            throws Exception {
            UpdateConsumerOffsetRequestHeader commit = new UpdateConsumerOffsetRequestHeader();
            commit.setConsumerGroup(group);
            commit.setTopic(topic);
            commit.setQueueId(0);
            commit.setCommitOffset(1L);
            api.updateConsumerOffset(addr, commit, timeout);
        }
    }

    // ---------------------------------------------------------------- push consumers that outlive a command

    /** Push consumers kept across script commands, so a test can run two at once and stop one of them. */
    static final class PushPool {
        private static final Map<String, Member> MEMBERS = new ConcurrentHashMap<>();
        private static final java.util.concurrent.atomic.AtomicLong ORDER_SEQ = new java.util.concurrent.atomic.AtomicLong();

        static final class Member {
            final String topic;
            final DefaultMQPushConsumer consumer;
            final List<JSONObject> buffer = new ArrayList<>();
            final AtomicInteger received = new AtomicInteger();

            Member(String topic, DefaultMQPushConsumer consumer) {
                this.topic = topic;
                this.consumer = consumer;
            }

            List<JSONObject> drain() {
                synchronized (buffer) {
                    List<JSONObject> out = new ArrayList<>(buffer);
                    buffer.clear();
                    return out;
                }
            }

            /** The queues of the topic this consumer owns now (its retry topic's queue left out). */
            List<Integer> queues() {
                Map<MessageQueue, ProcessQueue> table =
                    consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
                List<Integer> ids = new ArrayList<>();
                for (Map.Entry<MessageQueue, ProcessQueue> e : table.entrySet()) {
                    if (topic.equals(e.getKey().getTopic()) && !e.getValue().isDropped()) {
                        ids.add(e.getKey().getQueueId());
                    }
                }
                ids.sort(null);
                return ids;
            }
        }

        static void start(Args args) throws Exception {
            String name = args.require("name");
            if (MEMBERS.containsKey(name)) {
                throw new IllegalArgumentException("push consumer " + name + " is already running");
            }
            String topic = args.require("topic");
            String bodyFormat = args.get("body-format", "base64");
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.require("group"));
            consumer.setNamesrvAddr(args.require("namesrv"));
            consumer.setInstanceName(args.get("instance-name", name));
            consumer.setClientIP("127.0.0.1");
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            heartbeat(consumer, args);
            replicaTimings(consumer, args);
            subscribe(consumer, topic, args);
            if (args.has("max-reconsume-times")) {
                consumer.setMaxReconsumeTimes(args.getInt("max-reconsume-times", -1));
            }
            // Retry and DLQ: "reconsume-later" fails every delivery, so the message goes round %RETRY%G to %DLQ%G.
            String listener = args.get("listener", "success");
            if (!listener.equals("success") && !listener.equals("reconsume-later")) {
                throw new IllegalArgumentException("--listener wants success or reconsume-later, got " + listener);
            }
            ConsumeConcurrentlyStatus answer = listener.equals("success")
                ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS : ConsumeConcurrentlyStatus.RECONSUME_LATER;
            int nextDelayLevel = args.getInt("delay-level-when-next-consume", 0);
            Member member = new Member(topic, consumer);
            if (Boolean.parseBoolean(args.get("orderly", "false"))) {
                registerOrderly(consumer, member, name, bodyFormat, args.getInt("suspend-every", 0));
            } else consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                long receivedAt = System.currentTimeMillis();
                synchronized (member.buffer) {
                    for (MessageExt m : msgs) {
                        JSONObject j = message(m, bodyFormat);
                        j.put("consumer", name);
                        j.put("receivedAtMs", receivedAt);
                        member.buffer.add(j);
                        member.received.incrementAndGet();
                    }
                }
                ctx.setDelayLevelWhenNextConsume(nextDelayLevel);
                return answer;
            });
            consumer.start();
            MEMBERS.put(name, member);
            JSONObject j = new JSONObject();
            j.put("consumer", name);
            j.put("clientId", consumer.buildMQClientId());
            emit(j);
        }

        /** Issue 4: an orderly member; "seq" orders the deliveries of all members of this JVM. */
        private static void registerOrderly(DefaultMQPushConsumer consumer, Member member, String name,
            String bodyFormat, int suspendEvery) {
            java.util.Set<String> suspended = ConcurrentHashMap.newKeySet();
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (suspendEvery <= 0) {
                        break;
                    }
                    String body = new String(m.getBody(), StandardCharsets.UTF_8);
                    int bar = body.indexOf('|');
                    int index = Integer.parseInt(body.substring(body.lastIndexOf('-', bar) + 1, bar));
                    if (index % suspendEvery == 0 && suspended.add(m.getMsgId())) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                }
                synchronized (member.buffer) {
                    for (MessageExt m : msgs) {
                        JSONObject j = message(m, bodyFormat);
                        j.put("consumer", name);
                        j.put("seq", ORDER_SEQ.incrementAndGet());
                        member.buffer.add(j);
                        member.received.incrementAndGet();
                    }
                }
                try {
                    Thread.sleep(2);  // widen the window in which a second consumer could (wrongly) take the queue
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        }

        /** Master/slave tests: see a master leave or come back within --poll-namesrv-ms, commit every
         * --persist-offset-ms, and fetch little at a time, so that a suspended consumer has most messages left to
         * pull. */
        private static void replicaTimings(DefaultMQPushConsumer consumer, Args args) {
            if (args.has("poll-namesrv-ms")) {
                consumer.setPollNameServerInterval(args.getInt("poll-namesrv-ms", 30_000));
            }
            if (args.has("persist-offset-ms")) {
                consumer.setPersistConsumerOffsetInterval(args.getInt("persist-offset-ms", 5_000));
            }
            if (args.has("pull-batch-size")) {
                consumer.setPullBatchSize(args.getInt("pull-batch-size", 32));
            }
            if (args.has("pull-threshold-for-queue")) {
                consumer.setPullThresholdForQueue(args.getInt("pull-threshold-for-queue", 1000));
            }
        }

        static Member member(Args args) {
            String name = args.require("name");
            Member m = MEMBERS.get(name);
            if (m == null) {
                throw new IllegalArgumentException("no push consumer named " + name);
            }
            return m;
        }

        private static List<Member> members(Args args) {
            List<Member> out = new ArrayList<>();
            for (String name : args.require("names").split(",")) {
                Member m = MEMBERS.get(name);
                if (m == null) {
                    throw new IllegalArgumentException("no push consumer named " + name);
                }
                out.add(m);
            }
            return out;
        }

        static void balance(Args args) throws Exception {
            List<String> names = Arrays.asList(args.require("names").split(","));
            List<Member> members = members(args);
            int total = args.getInt("topic-queues", 4);
            long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 30_000);
            List<List<Integer>> owned;
            while (true) {
                owned = new ArrayList<>();
                for (Member m : members) {
                    owned.add(m.queues());
                }
                if (partitions(owned, total)) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("queues never split between " + names + ": " + owned);
                }
                Thread.sleep(20);
            }
            for (int i = 0; i < members.size(); i++) {
                JSONObject j = new JSONObject();
                j.put("consumer", names.get(i));
                j.put("queues", owned.get(i));
                emit(j);
            }
        }

        private static boolean partitions(List<List<Integer>> owned, int total) {
            List<Integer> all = new ArrayList<>();
            for (List<Integer> ids : owned) {
                if (ids.isEmpty()) {
                    return false;
                }
                all.addAll(ids);
            }
            all.sort(null);
            List<Integer> want = new ArrayList<>();
            for (int q = 0; q < total; q++) {
                want.add(q);
            }
            return all.equals(want);
        }

        static void await(Args args) throws Exception {
            List<Member> members = members(args);
            int count = args.getInt("count", 1);
            long deadline = System.currentTimeMillis() + args.getLong("timeout-ms", 30_000);
            boolean timedOut = false;
            while (received(members) < count) {
                if (System.currentTimeMillis() > deadline) {
                    timedOut = true;
                    break;
                }
                Thread.sleep(10);
            }
            Thread.sleep(args.getLong("settle-ms", 0));
            for (Member m : members) {
                for (JSONObject j : m.drain()) {
                    emit(j);
                }
            }
            JSONObject s = summary("push-await");
            s.put("count", received(members));
            s.put("timedOut", timedOut);
            emit(s);
        }

        private static int received(List<Member> members) {
            int n = 0;
            for (Member m : members) {
                n += m.received.get();
            }
            return n;
        }

        static void stop(Args args) {
            String name = args.require("name");
            Member m = MEMBERS.remove(name);
            if (m == null) {
                throw new IllegalArgumentException("no push consumer named " + name);
            }
            close(m.consumer::shutdown);
            for (JSONObject j : m.drain()) {
                emit(j);
            }
            JSONObject s = summary("push-stop");
            s.put("consumer", name);
            s.put("received", m.received.get());
            emit(s);
        }
    }

    /** Issue 4: --sql EXPR (MessageSelector.bySql), --tag EXPR (MessageSelector.byTag), else --tag-expr. */
    static void subscribe(DefaultMQPushConsumer consumer, String topic, Args args) throws MQClientException {
        if (args.has("sql")) {
            consumer.subscribe(topic, MessageSelector.bySql(args.get("sql", null)));
        } else if (args.has("tag")) {
            consumer.subscribe(topic, MessageSelector.byTag(args.get("tag", null)));
        } else {
            consumer.subscribe(topic, args.get("tag-expr", "*"));
        }
    }
}
