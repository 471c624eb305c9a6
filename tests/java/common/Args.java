/*
 * The drivers' command line (tests/java/client and tests/java/client49 share it): "--name value" pairs, a flag may
 * repeat (all() returns every value, get() the last), and one bare word, the command.
 */

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

final class Args {
    final String command;
    private final Map<String, List<String>> flags;

    private Args(String command, Map<String, List<String>> flags) {
        this.command = command;
        this.flags = flags;
    }

    /** "--name value" pairs and one bare word, the command; global flags are accepted and kept. */
    static Args parse(String[] argv) {
        String command = null;
        Map<String, List<String>> flags = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (a.startsWith("--")) {
                if (i + 1 >= argv.length) {
                    throw new IllegalArgumentException("flag " + a + " needs a value");
                }
                flags.computeIfAbsent(a.substring(2), k -> new ArrayList<>()).add(argv[++i]);
            } else if (command == null) {
                command = a;
            } else {
                throw new IllegalArgumentException("unexpected argument " + a);
            }
        }
        return new Args(command, flags);
    }

    boolean has(String name) {
        return flags.containsKey(name);
    }

    String get(String name, String fallback) {
        List<String> values = flags.get(name);
        return values == null ? fallback : values.get(values.size() - 1);
    }

    List<String> all(String name) {
        return flags.getOrDefault(name, List.of());
    }

    String require(String name) {
        String value = get(name, null);
        if (value == null) {
            throw new IllegalArgumentException((command == null ? "" : command + ": ") + "--" + name + " is required");
        }
        return value;
    }

    int getInt(String name, int fallback) {
        String value = get(name, null);
        return value == null ? fallback : Integer.parseInt(value);
    }

    long getLong(String name, long fallback) {
        String value = get(name, null);
        return value == null ? fallback : Long.parseLong(value);
    }
}
