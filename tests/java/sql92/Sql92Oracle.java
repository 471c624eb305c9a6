/*
 * Apache RocketMQ's own SQL92 selector (rocketmq-filter: SelectorParser and the expression classes) as an oracle for
 * rmq's broker/sql92.py (tests/interop/test_java_filters_ordered.py).
 *
 * Reads one case per stdin line: base64(UTF-8 expression), then base64(name):base64(value) per property, separated
 * by single spaces. Prints one line per case:
 *   OK <base64 toString()> TRUE|FALSE|NULL|THROW   the selector compiled; its evaluation on those properties (THROW:
 *                                                 evaluate() threw, which a broker counts as "not selected")
 *   ERR <base64 getMessage()>                     SelectorParser.parse threw MQFilterException (the broker's remark)
 * The evaluation context is the broker's MessageEvaluationContext: String properties looked up by name.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;
import org.apache.rocketmq.filter.expression.MQFilterException;
import org.apache.rocketmq.filter.parser.SelectorParser;

public class Sql92Oracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split(" ");
            String expression = decode(parts[0]);
            Map<String, String> properties = new HashMap<>();
            for (int i = 1; i < parts.length; i++) {
                int eq = parts[i].indexOf(':');
                properties.put(decode(parts[i].substring(0, eq)), decode(parts[i].substring(eq + 1)));
            }
            out.println(run(expression, properties));
        }
    }

    private static String run(String expression, Map<String, String> properties) {
        Expression compiled;
        try {
            compiled = SelectorParser.parse(expression);
        } catch (MQFilterException e) {
            return "ERR " + encode(String.valueOf(e.getMessage()));
        } catch (Throwable e) {
            return "ERR " + encode("UNEXPECTED " + e);
        }
        String result;
        try {
            Object value = compiled.evaluate(new Context(properties));
            result = value == null ? "NULL" : (value instanceof Boolean ? value.toString().toUpperCase() : "OTHER:" + value);
        } catch (Throwable e) {
            result = "THROW";
        }
        return "OK " + encode(compiled.toString()) + " " + result;
    }

    private static String decode(String text) {
        return new String(Base64.getDecoder().decode(text), StandardCharsets.UTF_8);
    }

    private static String encode(String text) {
        return Base64.getEncoder().encodeToString(text.getBytes(StandardCharsets.UTF_8));
    }

    /** The broker's MessageEvaluationContext. */
    static final class Context implements EvaluationContext {
        private final Map<String, String> properties;

        Context(Map<String, String> properties) {
            this.properties = properties;
        }

        @Override
        public Object get(String name) {
            return properties.get(name);
        }

        @Override
        public Map<String, Object> keyValues() {
            return new HashMap<>(properties);
        }
    }
}
