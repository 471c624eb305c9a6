/*
 * The official RocketMQ Java client as a load generator for bench/broker_throughput.py, shaped like Apache's own
 * benchmark tools (example/src/main/java/org/apache/rocketmq/example/benchmark/Producer.java, BatchProducer.java and
 * Consumer.java, run by distribution/benchmark/producer.sh, batchproducer.sh and consumer.sh):
 *
 *   produce --namesrv A --topic T [--threads 8] [--size 128] [--batch 1] [--seconds 10] [--warmup 2] [--group G]
 *           N threads (Producer's -w) each send synchronously in a loop: one message of --size random alphanumeric
 *           bytes (Producer's -s), or with --batch > 1 a list of that many (BatchProducer's -b, SEND_BATCH_MESSAGE).
 *           The first --warmup seconds are not counted; then --seconds are measured.
 *   consume --namesrv A --topic T --group G --expect N [--threads 20] [--seconds 120]
 *           A push consumer (Consumer's defaults: 20 consume threads, pullBatchSize 32, one message per listener
 *           call) from the first offset, until N messages arrived or --seconds passed.
 *
 * Both take [--access-key AK --secret-key SK] (the client signs every request with AclClientRPCHook, for a broker with
 * ACL 2.0 on) and [--trace true] (message trace on, ClientConfig.enableTrace: a Pub record per send, Sub records per
 * consume, sent to RMQ_SYS_TRACE_TOPIC by the client's trace dispatcher), as tests/java/client/ClientDriver.java.
 *
 * SEND_MESSAGE_V2 comes from -Dorg.apache.rocketmq.client.sendSmartMsg=true on the java command line, as
 * producer.sh passes it. --serialize ROCKETMQ|JSON (default ROCKETMQ, which Producer and Consumer set in their main)
 * chooses the header encoding. The last stdout line is one JSON object:
 *
 *   produce: {"mode":"produce","threads":8,"size":128,"batch":1,"seconds":10.0,"sent":..,"requests":..,
 *             "sendTps":..,"sendMps":..,"avgRtMs":..,"p99RtMs":..,"maxRtMs":..,"failed":..,"total":..}
 *            sendTps = requests/s (Producer's "Send TPS"; a batch is one request), sendMps = messages/s
 *            (BatchProducer's "Send MPS"), RT per request (p99 to 0.1 ms, of the measured window); total = every
 *            message stored, warm-up included
 *   consume: {"mode":"consume","received":..,"consumeTps":..,"seconds":..,"firstMessageMs":..}
 *            consumeTps = messages / (last arrival - first arrival)
 */

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.exception.RemotingException;

public class BenchClient {

    private static final long FAILURE_PAUSE_MS = 3000; // Producer.java sleeps this long after a failed send
    private static volatile boolean stop; // set when the measured window ends

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        // Before any RocketMQ class loads: RemotingCommand reads it once, in its static initializer.
        System.setProperty("rocketmq.serialize.type", args.getOrDefault("serialize", "ROCKETMQ"));
        String mode = argv.length > 0 ? argv[0] : "";
        switch (mode) {
            case "produce":
                produce(args);
                break;
            case "consume":
                consume(args);
                break;
            default:
                System.err.println("usage: BenchClient produce|consume --namesrv A --topic T ...");
                System.exit(2);
        }
        System.exit(0); // client threads are not all daemons
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --flag, got " + argv[i]);
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        return args;
    }

    private static String require(Map<String, String> args, String key) {
        String value = args.get(key);
        if (value == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return value;
    }

    private static int intArg(Map<String, String> args, String key, int fallback) {
        return args.containsKey(key) ? Integer.parseInt(args.get(key)) : fallback;
    }

    private static double doubleArg(Map<String, String> args, String key, double fallback) {
        return args.containsKey(key) ? Double.parseDouble(args.get(key)) : fallback;
    }

    /** --access-key AK --secret-key SK: every request signed (AclClientRPCHook); else no hook. */
    private static RPCHook rpcHook(Map<String, String> args) {
        String accessKey = args.get("access-key");
        return accessKey == null ? null
            : new AclClientRPCHook(new SessionCredentials(accessKey, require(args, "secret-key")));
    }

    /** --trace true: message trace on, to the default trace topic. */
    private static void trace(ClientConfig client, Map<String, String> args) {
        client.setEnableTrace(Boolean.parseBoolean(args.getOrDefault("trace", "false")));
    }

    /** Producer.java's body: messageSize random alphanumeric characters. */
    private static byte[] body(int size) {
        String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        StringBuilder sb = new StringBuilder(size);
        for (int i = 0; i < size; i++) {
            sb.append(alphabet.charAt(ThreadLocalRandom.current().nextInt(alphabet.length())));
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    // ---------------------------------------------------------------- produce

    /** StatsBenchmarkProducer's counters; the window's maximum RT is reset when measuring starts, and RTs go in
     * 0.1 ms buckets (up to 10 s) from then on, for the p99. */
    static final class Stats {
        static final long BUCKET_NANOS = 100_000;
        final LongAdder requests = new LongAdder();
        final LongAdder messages = new LongAdder();
        final LongAdder failed = new LongAdder();
        final LongAdder rtNanos = new LongAdder();
        final AtomicLong maxRtNanos = new AtomicLong();
        final AtomicLongArray rtBuckets = new AtomicLongArray(100_001);
        volatile boolean measuring;

        void success(int count, long rt) {
            requests.increment();
            messages.add(count);
            rtNanos.add(rt);
            if (measuring) {
                rtBuckets.incrementAndGet((int) Math.min(rt / BUCKET_NANOS, rtBuckets.length() - 1));
            }
            long prev = maxRtNanos.get();
            while (rt > prev && !maxRtNanos.compareAndSet(prev, rt)) {
                prev = maxRtNanos.get();
            }
        }

        /** The RT under which 99 % of the measured window's requests were answered, in ms (a bucket's upper end). */
        double p99Ms() {
            long total = 0;
            for (int i = 0; i < rtBuckets.length(); i++) {
                total += rtBuckets.get(i);
            }
            long seen = 0;
            for (int i = 0; i < rtBuckets.length(); i++) {
                seen += rtBuckets.get(i);
                if (total > 0 && seen * 100 >= total * 99) {
                    return (i + 1) * BUCKET_NANOS / 1e6;
                }
            }
            return 0.0;
        }

        long[] snapshot() {
            return new long[] {System.nanoTime(), requests.sum(), messages.sum(), failed.sum(), rtNanos.sum()};
        }
    }

    private static void produce(Map<String, String> args) throws Exception {
        String topic = require(args, "topic");
        int threads = intArg(args, "threads", 8);
        int size = intArg(args, "size", 128);
        int batch = intArg(args, "batch", 1);
        double seconds = doubleArg(args, "seconds", 10);
        double warmup = doubleArg(args, "warmup", 2);
        byte[] msgBody = body(size);

        DefaultMQProducer producer = new DefaultMQProducer(args.getOrDefault("group", "benchmark_producer"),
            rpcHook(args));
        producer.setNamesrvAddr(require(args, "namesrv"));
        producer.setInstanceName(Long.toString(System.nanoTime()));
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE); // Producer.java without -c
        trace(producer, args);
        producer.start();

        Stats stats = new Stats();
        stop = false;
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> sendLoop(producer, topic, msgBody, batch, stats), "bench-send-" + t);
            worker.setDaemon(true);
            workers.add(worker);
            worker.start();
        }
        Thread.sleep((long) (warmup * 1000));
        stats.maxRtNanos.set(0);
        stats.measuring = true;
        long[] begin = stats.snapshot();
        Thread.sleep((long) (seconds * 1000));
        long[] end = stats.snapshot();
        stats.measuring = false;
        long maxRt = stats.maxRtNanos.get();
        stop = true;
        for (Thread worker : workers) {
            worker.join(FAILURE_PAUSE_MS + 10_000);
        }
        producer.shutdown();

        double elapsed = (end[0] - begin[0]) / 1e9;
        long requests = end[1] - begin[1];
        long messages = end[2] - begin[2];
        StringBuilder json = new StringBuilder("{\"mode\":\"produce\"");
        field(json, "threads", threads);
        field(json, "size", size);
        field(json, "batch", batch);
        field(json, "seconds", elapsed);
        field(json, "sent", messages);
        field(json, "requests", requests);
        field(json, "sendTps", requests / elapsed);
        field(json, "sendMps", messages / elapsed);
        field(json, "avgRtMs", requests == 0 ? 0.0 : (end[4] - begin[4]) / 1e6 / requests);
        field(json, "p99RtMs", stats.p99Ms());
        field(json, "maxRtMs", maxRt / 1e6);
        field(json, "failed", end[3] - begin[3]);
        field(json, "failedTotal", stats.failed.sum());
        field(json, "total", stats.messages.sum());
        System.out.println(json.append('}'));
    }

    private static void sendLoop(DefaultMQProducer producer, String topic, byte[] msgBody, int batch, Stats stats) {
        while (!stop) {
            long begin = System.nanoTime();
            try {
                SendResult result;
                if (batch > 1) {
                    List<Message> msgs = new ArrayList<>(batch);
                    for (int i = 0; i < batch; i++) {
                        msgs.add(new Message(topic, msgBody));
                    }
                    result = producer.send(msgs);
                } else {
                    result = producer.send(new Message(topic, msgBody));
                }
                if (result.getSendStatus() == SendStatus.SEND_OK) {
                    stats.success(batch, System.nanoTime() - begin);
                } else {
                    stats.failed.increment();
                }
            } catch (RemotingException | MQBrokerException e) {
                stats.failed.increment();
                e.printStackTrace(System.err);
                pause();
            } catch (MQClientException e) {
                stats.failed.increment();
                e.printStackTrace(System.err);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static void pause() {
        try {
            Thread.sleep(FAILURE_PAUSE_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---------------------------------------------------------------- consume

    private static void consume(Map<String, String> args) throws Exception {
        long expect = Long.parseLong(require(args, "expect"));
        double seconds = doubleArg(args, "seconds", 120);
        int threads = intArg(args, "threads", 20);
        LongAdder received = new LongAdder();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(require(args, "group"), rpcHook(args));
        consumer.setNamesrvAddr(require(args, "namesrv"));
        consumer.setInstanceName(Long.toString(System.nanoTime()));
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        trace(consumer, args);
        consumer.subscribe(require(args, "topic"), "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            received.add(msgs.size());
            last.set(now);
            if (received.sum() >= expect) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long start = System.nanoTime();
        consumer.start();
        done.await((long) (seconds * 1000), TimeUnit.MILLISECONDS);
        long count = received.sum();
        long end = System.nanoTime();
        consumer.shutdown();

        double window = (last.get() - first.get()) / 1e9;
        StringBuilder json = new StringBuilder("{\"mode\":\"consume\"");
        field(json, "received", count);
        field(json, "expected", expect);
        field(json, "consumeTps", window > 0 ? count / window : 0.0);
        field(json, "seconds", (end - start) / 1e9);
        field(json, "firstMessageMs", first.get() == 0 ? -1.0 : (first.get() - start) / 1e6);
        System.out.println(json.append('}'));
    }

    private static void field(StringBuilder json, String name, long value) {
        json.append(",\"").append(name).append("\":").append(value);
    }

    private static void field(StringBuilder json, String name, double value) {
        json.append(",\"").append(name).append("\":").append(String.format(java.util.Locale.ROOT, "%.3f", value));
    }
}
