/*
 * Runs Apache's mqadmin (org.apache.rocketmq.tools.command.MQAdminStartup) unchanged, one command per JVM, minus
 * about 5 s of waiting at the end of every command.
 *
 *   java ... MqadminLauncher topicStatus -n 127.0.0.1:9876 -t TopicTest
 *
 * Why: each command ends with DefaultMQAdminExt.shutdown(), which stops the client's NettyEventExecutor. That
 * ServiceThread polls its event queue with a 3 s timeout and ServiceThread.shutdown() joins it without an interrupt,
 * so every command took about 3 s longer than its work. A daemon thread here interrupts executors that are already
 * stopped (the same trick as tests/java/client/ServerLauncher); their loop sees `stopped` and ends. What the command
 * prints, and its exit code, are MQAdminStartup's. Then, once main has returned, the JVM exits instead of waiting
 * out the 2 s quiet period of Netty's graceful event-loop shutdown.
 *
 * Needs --add-opens java.base/java.lang=ALL-UNNAMED to read a thread's Runnable; without it only the stall remains.
 */

import java.lang.reflect.Field;

import org.apache.rocketmq.tools.command.MQAdminStartup;

public final class MqadminLauncher {
    private static final String EXECUTOR_THREAD = "NettyEventExecutor";
    private static final long POLL_MS = 5;

    private MqadminLauncher() {
    }

    public static void main(String[] args) {
        Thread watch = new Thread(MqadminLauncher::interruptStoppedExecutors, "mqadmin-launcher-watch");
        watch.setDaemon(true);
        watch.start();
        MQAdminStartup.main(args);
        // Netty's event loops shut down gracefully, with a 2 s quiet period, in non-daemon threads; the command has
        // printed everything by now (main0 catches and prints its errors), so 0 is also what MQAdminStartup returns.
        System.out.flush();
        System.err.flush();
        System.exit(0);
    }

    private static void interruptStoppedExecutors() {
        while (true) {
            Thread[] threads = new Thread[Thread.activeCount() + 32];
            int n = Thread.enumerate(threads);
            for (int i = 0; i < n; i++) {
                Thread t = threads[i];
                if (EXECUTOR_THREAD.equals(t.getName()) && t.isAlive() && isStopped(t)) {
                    t.interrupt();
                }
            }
            try {
                Thread.sleep(POLL_MS);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private static boolean isStopped(Thread t) {
        try {
            Field target = Thread.class.getDeclaredField("target");
            target.setAccessible(true);
            Object service = target.get(t);
            return service != null && Boolean.TRUE.equals(service.getClass().getMethod("isStopped").invoke(service));
        } catch (ReflectiveOperationException | RuntimeException e) {
            return false;
        }
    }
}
