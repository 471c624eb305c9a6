/*
 * What the two client drivers share, word for word: ClientDriver (rocketmq-client 5.x, tests/java/client) and
 * ClientDriver49 (4.9.x, tests/java/client49). Compiled into each of them, against each client's classpath.
 *
 * The command line and script mode, the JSON lines on the real stdout (System.out goes to stderr before any
 * RocketMQ class loads, so library noise never mixes in), the {"error"} and {"done"} records, message bodies, unique
 * client names and a client shutdown without the remoting client's 3 s stall. The JSON library is not shared
 * (fastjson in 4.9, fastjson2 in 5.x), so each driver passes its own in as a Json; records are LinkedHashMaps,
 * which both libraries write in insertion order, as they write their own JSONObjects.
 */

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;

final class DriverMain {
    /** One driver's JSON library. */
    interface Json {
        String write(Map<String, ?> record);

        /** A script line that is a JSON array of strings, as the tokens of one command. */
        String[] strings(String array);
    }

    /** One driver's commands: runs the command of ``args``, its records going out through emit(). */
    interface Commands {
        void dispatch(Args args) throws Exception;
    }

    private static final AtomicInteger INSTANCE_SEQ = new AtomicInteger();
    private static PrintStream out;
    private static Json json;

    private DriverMain() {
    }

    /**
     * The driver's main: global flags become system properties (the common ones here, then ``moreProperties``),
     * then one command runs, or with "script" one per stdin line. Exits 0, 1 (a command failed) or 2 (bad flags).
     */
    static void run(String[] argv, Json library, Consumer<Args> moreProperties, Commands commands) {
        // The real stdout carries only our JSON; anything a library prints goes to stderr.
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        json = library;
        Args global;
        try {
            global = Args.parse(argv);
            applySystemProperties(global);
            moreProperties.accept(global);
        } catch (RuntimeException e) {
            emit(error(e));
            System.exit(2);
            return;
        }
        int rc = "script".equals(global.command) ? runScript(commands) : runOne(global, commands);
        out.flush();
        System.exit(rc);
    }

    /** Must run before any RocketMQ class initializes: they read these properties into static fields. */
    private static void applySystemProperties(Args args) {
        String serialize = args.get("serialize", null);
        if (serialize != null) {
            System.setProperty("rocketmq.serialize.type", serialize.toUpperCase());
        }
        String smart = args.get("smart-msg", null);
        if (smart != null) {
            System.setProperty("org.apache.rocketmq.client.sendSmartMsg", smart);
        }
        String logRoot = args.get("log-root", null);
        if (logRoot != null) {
            System.setProperty("rocketmq.log.root", logRoot);
            System.setProperty("user.home", logRoot);
        }
    }

    private static int runOne(Args args, Commands commands) {
        try {
            dispatch(args, commands);
            return 0;
        } catch (Throwable e) {
            emit(error(e));
            return 1;
        }
    }

    private static int runScript(Commands commands) {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int failures = 0;
        try {
            String line;
            while ((line = in.readLine()) != null) {
                line = line.trim();
                if (line.isEmpty() || line.startsWith("#")) {
                    continue;
                }
                long start = System.nanoTime();
                String command = "?";
                boolean ok;
                try {
                    Args args = Args.parse(tokens(line));
                    command = args.command;
                    if ("quit".equals(command) || "exit".equals(command)) {
                        break;
                    }
                    dispatch(args, commands);
                    ok = true;
                } catch (Throwable e) {
                    emit(error(e));
                    ok = false;
                    failures++;
                }
                Map<String, Object> done = new LinkedHashMap<>();
                done.put("done", command);
                done.put("ok", ok);
                done.put("elapsedMs", (System.nanoTime() - start) / 1_000_000);
                emit(done);
            }
        } catch (Exception e) {
            emit(error(e));
            return 1;
        }
        return failures == 0 ? 0 : 1;
    }

    private static String[] tokens(String line) {
        if (line.startsWith("[")) {
            return json.strings(line);
        }
        return line.split("\\s+");
    }

    private static void dispatch(Args args, Commands commands) throws Exception {
        if (args.command == null) {
            throw new IllegalArgumentException("no command given");
        }
        commands.dispatch(args);
    }

    // ---------------------------------------------------------------- output

    static synchronized void emit(Map<String, ?> record) {
        out.println(json.write(record));
    }

    /** {"error": class: message} with "code" for a response code, and the cause likewise ("cause", "causeCode"). */
    private static Map<String, Object> error(Throwable e) {
        Map<String, Object> err = new LinkedHashMap<>();
        err.put("error", e.getClass().getName() + ": " + e.getMessage());
        putCode(err, "code", e);
        Throwable cause = e.getCause();
        if (cause != null) {
            err.put("cause", cause.getClass().getName() + ": " + cause.getMessage());
            putCode(err, "causeCode", cause);
        }
        e.printStackTrace(System.err);
        return err;
    }

    private static void putCode(Map<String, Object> err, String key, Throwable e) {
        if (e instanceof MQClientException) {
            err.put(key, ((MQClientException) e).getResponseCode());
        } else if (e instanceof MQBrokerException) {
            err.put(key, ((MQBrokerException) e).getResponseCode());
        }
    }

    /** A client call whose refusal by the broker is an outcome to report, not a failure of the command. */
    interface BrokerCall {
        /** The call's status name (SEND_OK, FOUND...), or null when it has none. */
        String run() throws Exception;
    }

    /**
     * {"call": name, "code": 0, "remark": null, "status": ...} when the call went through, or the broker's answer
     * {"call": name, "code": c, "remark": r} when it refused it (MQBrokerException, or an MQClientException that
     * carries a response code); anything else (a timeout, a client-side check) fails the command.
     */
    static Map<String, Object> outcome(String name, BrokerCall call) throws Exception {
        Map<String, Object> record = new LinkedHashMap<>();
        record.put("call", name);
        try {
            String status = call.run();
            record.put("code", 0);
            record.put("remark", null);
            record.put("status", status);
        } catch (MQBrokerException e) {
            record.put("code", e.getResponseCode());
            record.put("remark", e.getErrorMessage());
        } catch (MQClientException e) {
            if (e.getResponseCode() <= 0) {
                throw e;
            }
            record.put("code", e.getResponseCode());
            record.put("remark", e.getErrorMessage());
        }
        return record;
    }

    // ---------------------------------------------------------------- clients and messages

    /** ``stem``-pid-n: a client name no other client of this JVM (or of another driver JVM) has. */
    static String uniqueName(String stem) {
        return stem + "-" + ProcessHandle.current().pid() + "-" + INSTANCE_SEQ.incrementAndGet();
    }

    /** The body of message ``index``: UTF-8 "prefix-index|" padded with 'x' to ``size`` bytes (cut when longer). */
    static byte[] body(String prefix, int index, int size) {
        byte[] head = (prefix + "-" + index + "|").getBytes(StandardCharsets.UTF_8);
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'x');
        System.arraycopy(head, 0, body, 0, Math.min(head.length, size));
        return body;
    }

    /**
     * Shut a client down without its up-to-3 s stall: the remoting client's NettyEventExecutor polls its queue with
     * a 3 s timeout and ServiceThread.shutdown() joins it without interrupting (see ServerLauncher), so while the
     * shutdown runs we interrupt the executors it has already stopped.
     */
    static void close(Runnable shutdown) {
        Thread kicker = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                ServerLauncher.interruptStoppedEventExecutors();
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "driver-shutdown-kicker");
        kicker.setDaemon(true);
        kicker.start();
        try {
            shutdown.run();
        } finally {
            kicker.interrupt();
        }
    }
}
