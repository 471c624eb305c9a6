/*
 * The official RocketMQ 4.9.x Java client (rocketmq-client 4.9.8) as a command-line driver: the subset of
 * tests/java/client/ClientDriver.java that a 4.x application uses, printing the same JSON lines, so the tests can
 * compare what a 4.x and a 5.x client observe. A separate program because ClientDriver needs 5.x-only packages
 * (org.apache.rocketmq.remoting.protocol.*, fastjson2, rocketmq-tools 5).
 *
 *   produce      --namesrv A --topic T [--count N] [--size B] [--body-prefix P] [--tag X] [--keys-prefix K]
 *                [--mode sync|async|oneway|batch] [--batch 16] [--group G] [--queue Q] [--property k=v]...
 *   consume-pull --namesrv A --topic T --max N [--group G] [--from earliest|offsets|committed] [--offsets q:o,...]
 *                [--queue Q] [--timeout-ms MS] [--body-format base64|utf8|none]   (DefaultLitePullConsumer, assign)
 *   consume-push --namesrv A --topic T --group G --max N [--timeout-ms MS] [--instance-name X] [--tag-expr *]
 *                [--heartbeat-ms MS]
 *   acl-calls    --namesrv A --topic T --group G [--admin-topic T2] [--access-key AK --secret-key SK]: as in
 *                ClientDriver, signed by rocketmq-acl 4.9.8's AclClientRPCHook
 *   script       one command per stdin line; each command's output ends with {"done": "<command>", "ok": ...}
 *
 * Global flags as in ClientDriver: --serialize JSON|ROCKETMQ, --smart-msg true|false, --log-root DIR. Message bodies
 * are ClientDriver's (tests/apache/client.py driver_body()). What is word for word the same in both drivers (the
 * command line, script mode, error records, bodies, client shutdown, acl-calls but for its request headers) lives in
 * tests/java/common, compiled into both.
 */

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.common.sysflag.PullSysFlag;
import org.apache.rocketmq.common.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.RPCHook;

public final class ClientDriver49 {
    private ClientDriver49() {
    }

    /** The shared main (tests/java/common/DriverMain.java) with fastjson and this driver's commands. */
    public static void main(String[] argv) {
        DriverMain.run(argv, new DriverMain.Json() {
            @Override
            public String write(Map<String, ?> record) {
                return JSON.toJSONString(record, SerializerFeature.WriteMapNullValue);
            }

            @Override
            public String[] strings(String array) {
                return JSON.parseArray(array, String.class).toArray(new String[0]);
            }
        }, ClientDriver49::applyClientLogRoot, ClientDriver49::dispatch);
    }

    /** The 4.x client's own logger reads rocketmq.client.logRoot (5.x: rocketmq.log.root, set by DriverMain). */
    private static void applyClientLogRoot(Args args) {
        String logRoot = args.get("log-root", null);
        if (logRoot != null) {
            System.setProperty("rocketmq.client.logRoot", logRoot);
        }
    }

    /** --access-key AK --secret-key SK: the client signs every request (rocketmq-acl's AclClientRPCHook). */
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
            case "consume-pull":
                ConsumePull.run(args);
                break;
            case "consume-push":
                ConsumePush.run(args);
                break;
            case "acl-calls":
                AclCalls.run(args, rpcHook(args), instanceName(args, "acl"), new AclHeaders());
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
        JSONObject s = new JSONObject(true);
        s.put("summary", command);
        return s;
    }

    static JSONObject message(MessageExt m, String bodyFormat) {
        JSONObject j = new JSONObject(true);
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
        j.put("storeTimestamp", m.getStoreTimestamp());
        j.put("reconsumeTimes", m.getReconsumeTimes());
        j.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        return j;
    }

    /** A shutdown without the remoting client's 3 s event-executor stall (see DriverMain.close). */
    static void close(Runnable shutdown) {
        DriverMain.close(shutdown);
    }

    static String instanceName(Args args, String kind) {
        return args.get("instance-name", DriverMain.uniqueName("driver49-" + kind));
    }

    // ---------------------------------------------------------------- produce

    static final class Produce {
        static void run(Args args) throws Exception {
            String topic = args.require("topic");
            int count = args.getInt("count", 1);
            String mode = args.get("mode", "sync");
            long timeout = args.getLong("timeout-ms", 10_000);
            List<Message> messages = build(args, topic, count);
            DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "driver49_producer_group"));
            producer.setNamesrvAddr(args.require("namesrv"));
            producer.setInstanceName(instanceName(args, "producer"));
            producer.setClientIP("127.0.0.1");
            producer.setSendMsgTimeout((int) timeout);
            producer.start();
            long start = System.nanoTime();
            try {
                MessageQueue mq = args.has("queue") ? Queues.target(producer, topic, args.getInt("queue", 0)) : null;
                switch (mode) {
                    case "sync":
                        for (int i = 0; i < messages.size(); i++) {
                            Message m = messages.get(i);
                            emitSent(i, m, mq == null ? producer.send(m, timeout) : producer.send(m, mq, timeout));
                        }
                        break;
                    case "async":
                        sendAsync(producer, messages, mq, timeout);
                        break;
                    case "oneway":
                        for (Message m : messages) {
                            if (mq == null) {
                                producer.sendOneway(m);
                            } else {
                                producer.sendOneway(m, mq);
                            }
                        }
                        break;
                    case "batch":
                        sendBatches(producer, messages, mq, args.getInt("batch", 16), timeout);
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
                for (String[] kv : props) {
                    m.putUserProperty(kv[0], kv[1]);
                }
                messages.add(m);
            }
            return messages;
        }

        private static void emitSent(int index, Message m, SendResult r) {
            emitSent(index, m, r.getSendStatus().name(), r.getMsgId(), r.getOffsetMsgId(), r.getMessageQueue(),
                r.getQueueOffset());
        }

        private static void emitSent(int index, Message m, String status, String msgId, String offsetMsgId,
            MessageQueue mq, long queueOffset) {
            JSONObject j = new JSONObject(true);
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
            emit(j);
        }

        private static void sendAsync(DefaultMQProducer producer, List<Message> messages, MessageQueue mq,
            long timeout) throws Exception {
            int n = messages.size();
            SendResult[] results = new SendResult[n];
            Throwable[] failures = new Throwable[n];
            CountDownLatch latch = new CountDownLatch(n);
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

        private static void sendBatches(DefaultMQProducer producer, List<Message> messages, MessageQueue mq,
            int batchSize, long timeout) throws Exception {
            for (int from = 0; from < messages.size(); from += batchSize) {
                List<Message> batch = messages.subList(from, Math.min(messages.size(), from + batchSize));
                SendResult r = mq == null ? producer.send(batch, timeout) : producer.send(batch, mq, timeout);
                String[] ids = r.getMsgId().split(",");
                String[] offsetIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
                for (int j = 0; j < batch.size(); j++) {
                    emitSent(from + j, batch.get(j), r.getSendStatus().name(), j < ids.length ? ids[j] : null,
                        j < offsetIds.length ? offsetIds[j] : null, r.getMessageQueue(), r.getQueueOffset() + j);
                }
            }
        }
    }

    // ---------------------------------------------------------------- consume

    static final class ConsumePull {
        static void run(Args args) throws Exception {
            String topic = args.require("topic");
            int max = Integer.parseInt(args.require("max"));
            long timeout = args.getLong("timeout-ms", 15_000);
            String bodyFormat = args.get("body-format", "base64");
            String from = args.get("from", "earliest");
            if (!List.of("earliest", "offsets", "committed").contains(from)) {
                throw new IllegalArgumentException("unknown --from " + from);
            }
            String group = args.get("group", "driver49_pull_group");
            DefaultLitePullConsumer consumer = newConsumer(args, group);
            long start = System.nanoTime();
            int got = 0;
            int stale = 0;
            boolean timedOut = false;
            try {
                // A message before the offset expected next on its queue is dropped and counted (a safety net).
                Map<MessageQueue, Long> next = new HashMap<>();
                if ("committed".equals(from)) {
                    consumer.start();
                    consumer.assign(Queues.selected(consumer.fetchMessageQueues(topic), args));
                } else {
                    next = seekPaused(consumer, Queues.selected(queuesOf(args, topic), args), args, from);
                }
                long deadline = System.currentTimeMillis() + timeout;
                while (got < max) {
                    long left = deadline - System.currentTimeMillis();
                    if (left <= 0) {
                        timedOut = true;
                        break;
                    }
                    for (MessageExt m : consumer.poll(Math.min(left, 500))) {
                        if (got >= max) {
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

        private static DefaultLitePullConsumer newConsumer(Args args, String group) {
            DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
            consumer.setNamesrvAddr(args.require("namesrv"));
            consumer.setInstanceName(instanceName(args, "pull"));
            consumer.setClientIP("127.0.0.1");
            consumer.setAutoCommit(false);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setPullBatchSize(args.getInt("pull-batch", 32));
            consumer.setPollTimeoutMillis(500);
            return consumer;
        }

        /** The topic's queues, from a short-lived probe consumer: ours must be assigned before it starts. */
        private static Collection<MessageQueue> queuesOf(Args args, String topic) throws Exception {
            DefaultLitePullConsumer probe = newConsumer(args, "driver49_probe_group");
            probe.start();
            try {
                return probe.fetchMessageQueues(topic);
            } finally {
                close(probe::shutdown);
            }
        }

        /**
         * As ClientDriver's seekPaused: assigned and paused before start(), so the first pull tasks pull nothing
         * that a seek would have to race (4.9 has the same PullTaskImpl), then sought and resumed. Returns the
         * offsets sought explicitly (--offsets); earliest uses seekToBegin.
         */
        private static Map<MessageQueue, Long> seekPaused(DefaultLitePullConsumer consumer, List<MessageQueue> queues,
            Args args, String from) throws Exception {
            Map<Integer, Long> offsets = new HashMap<>();
            if ("offsets".equals(from)) {
                for (String pair : args.require("offsets").split(",")) {
                    String[] qo = pair.split(":");
                    offsets.put(Integer.parseInt(qo[0]), Long.parseLong(qo[1]));
                }
            }
            consumer.assign(queues);
            consumer.pause(queues);
            consumer.start();
            Map<MessageQueue, Long> sought = new HashMap<>();
            for (MessageQueue mq : queues) {
                if (offsets.containsKey(mq.getQueueId())) {
                    consumer.seek(mq, offsets.get(mq.getQueueId()));
                    sought.put(mq, offsets.get(mq.getQueueId()));
                } else {
                    consumer.seekToBegin(mq);
                }
            }
            consumer.resume(queues);
            return sought;
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
            if (args.has("heartbeat-ms")) {  // see ClientDriver.heartbeat: a rebalance's heartbeat can be skipped
                consumer.setHeartbeatBrokerInterval(args.getInt("heartbeat-ms", 30_000));
            }
            consumer.setAwaitTerminationMillisWhenShutdown(3_000);  // offsets of batches in flight, as in ClientDriver
            consumer.subscribe(args.require("topic"), args.get("tag-expr", "*"));
            AtomicInteger got = new AtomicInteger();
            CountDownLatch enough = new CountDownLatch(1);
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    int n = got.incrementAndGet();
                    if (n <= max) {
                        emit(message(m, bodyFormat));
                    }
                    if (n >= max) {
                        enough.countDown();
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
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
    }

    // ---------------------------------------------------------------- ACL outcomes

    /** acl-calls (tests/java/common/AclCalls) with this client's request headers (4.9's common.protocol.header). */
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
}
