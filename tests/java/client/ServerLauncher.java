/*
 * Runs an Apache RocketMQ server main class (NamesrvStartup, BrokerStartup) unchanged, plus one shutdown hook that
 * cuts a pointless stall out of a clean stop.
 *
 *   java ... ServerLauncher org.apache.rocketmq.broker.BrokerStartup -c broker.conf
 *
 * Why: each remoting client/server owns a NettyEventExecutor that polls its event queue with a 3 s timeout, and
 * ServiceThread.shutdown() sets `stopped` and joins the thread without interrupting it, so every executor adds up to
 * 3 s to a SIGTERM (a broker has three). The hook runs beside the server's own hook and interrupts only executors
 * that are already stopped; their loop catches the interrupt, sees `stopped` and ends. Nothing else is touched: the
 * store's flush, checkpoint and abort-file handling run exactly as in Apache's shutdown.
 *
 * Uses reflection only (no RocketMQ imports) so it runs on any server classpath; needs
 * --add-opens java.base/java.lang=ALL-UNNAMED to read a thread's Runnable, and without it does nothing.
 */

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

public final class ServerLauncher {
    private static final String EXECUTOR_THREAD = "NettyEventExecutor";
    private static final long HOOK_LIMIT_MS = 120_000;
    /** The server's own shutdown hooks, captured once its main has returned (the JVM forgets them at exit). */
    private static volatile List<Thread> serverHooks = List.of();

    private ServerLauncher() {
    }

    public static void main(String[] args) throws Throwable {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: ServerLauncher <main class> [args...]");
        }
        Thread watch = new Thread(ServerLauncher::watchShutdown, "launcher-shutdown-watch");
        Runtime.getRuntime().addShutdownHook(watch);
        Method main = Class.forName(args[0]).getMethod("main", String[].class);
        main.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        List<Thread> hooks = registeredHooks();
        hooks.remove(watch);
        serverHooks = hooks;
    }

    /** While the server's hooks run, interrupt the event executors they have already stopped. */
    private static void watchShutdown() {
        long deadline = System.currentTimeMillis() + HOOK_LIMIT_MS;
        while (System.currentTimeMillis() < deadline && anyAlive(serverHooks)) {
            interruptStoppedEventExecutors();
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private static boolean anyAlive(List<Thread> threads) {
        for (Thread t : threads) {
            if (t.isAlive() || t.getState() == Thread.State.NEW) {
                return true;
            }
        }
        return false;
    }

    @SuppressWarnings("unchecked")
    private static List<Thread> registeredHooks() {
        try {
            Class<?> hooksClass = Class.forName("java.lang.ApplicationShutdownHooks");
            Field field = hooksClass.getDeclaredField("hooks");
            field.setAccessible(true);
            synchronized (hooksClass) {
                Map<Thread, Thread> hooks = (Map<Thread, Thread>) field.get(null);
                return hooks == null ? new ArrayList<>() : new ArrayList<>(hooks.keySet());
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            return new ArrayList<>();
        }
    }

    /** Interrupts the NettyEventExecutor threads whose ServiceThread is stopped; returns how many it interrupted. */
    static int interruptStoppedEventExecutors() {
        Thread[] threads = new Thread[Thread.activeCount() + 32];
        int n = Thread.enumerate(threads);
        int interrupted = 0;
        for (int i = 0; i < n; i++) {
            Thread t = threads[i];
            if (EXECUTOR_THREAD.equals(t.getName()) && t.isAlive() && isStopped(t)) {
                t.interrupt();
                interrupted++;
            }
        }
        return interrupted;
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
