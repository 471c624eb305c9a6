/*
 * Runs an Apache RocketMQ server main class (NamesrvStartup, BrokerStartup) unchanged, plus two things that only
 * take waiting out of a test: one shutdown hook that cuts a pointless stall out of a clean stop, and (broker) one
 * early registration with the name servers (see startBroker).
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
    private static final long REGISTER_WAIT_MS = 10_000;
    private static final String BROKER_STARTUP = "org.apache.rocketmq.broker.BrokerStartup";
    private static final String BROKER_CONTROLLER = "org.apache.rocketmq.broker.BrokerController";
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
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        if (BROKER_STARTUP.equals(args[0])) {
            startBroker(rest);
        } else {
            Class.forName(args[0]).getMethod("main", String[].class).invoke(null, (Object) rest);
        }
        List<Thread> hooks = registeredHooks();
        hooks.remove(watch);
        serverHooks = hooks;
    }

    /**
     * BrokerStartup.main, plus one early registerBrokerAll. The broker registers only with name servers its remoting
     * client has already found reachable (getAvailableNameSrvList, filled by an asynchronous scan); when the scan
     * loses the race with BrokerController.start(), the first registration waits for the periodic task, 10 s later.
     * So once the scan has seen every configured name server, we make the same call that task makes.
     */
    private static void startBroker(String[] args) throws ReflectiveOperationException {
        Class<?> startup = Class.forName(BROKER_STARTUP);
        Object controller = startup.getMethod("createBrokerController", String[].class).invoke(null, (Object) args);
        startup.getMethod("start", Class.forName(BROKER_CONTROLLER)).invoke(null, controller);
        Object config = controller.getClass().getMethod("getBrokerConfig").invoke(controller);
        String namesrvAddr = (String) config.getClass().getMethod("getNamesrvAddr").invoke(config);
        if (namesrvAddr == null || namesrvAddr.isBlank()) {
            return;
        }
        Object outerApi = controller.getClass().getMethod("getBrokerOuterAPI").invoke(controller);
        Object client = outerApi.getClass().getMethod("getRemotingClient").invoke(outerApi);
        Method available = client.getClass().getMethod("getAvailableNameSrvList");
        List<String> wanted = Arrays.asList(namesrvAddr.split(";"));
        long deadline = System.currentTimeMillis() + REGISTER_WAIT_MS;
        while (System.currentTimeMillis() < deadline && !((List<?>) available.invoke(client)).containsAll(wanted)) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                return;
            }
        }
        controller.getClass().getMethod("registerBrokerAll", boolean.class, boolean.class, boolean.class)
            .invoke(controller, true, false, true);
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
