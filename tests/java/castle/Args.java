package castle;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * The command line of every program here: {@code name=value} words. A name with a dot is a
 * Kafka client config passed through to the client as is (so a test may set any of them);
 * a name without one is the program's own option.
 */
final class Args {
    private final Map<String, String> options = new LinkedHashMap<>();
    private final Properties clientConfigs = new Properties();

    Args(String[] argv) {
        for (String word : argv) {
            int eq = word.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("not name=value: " + word);
            }
            String name = word.substring(0, eq);
            String value = word.substring(eq + 1);
            if (name.contains(".")) {
                clientConfigs.setProperty(name, value);
            } else {
                options.put(name, value);
            }
        }
    }

    String get(String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing option " + name + "=...");
        }
        return value;
    }

    String get(String name, String fallback) {
        return options.getOrDefault(name, fallback);
    }

    int getInt(String name, int fallback) {
        return Integer.parseInt(get(name, Integer.toString(fallback)));
    }

    /** The client configs given on the command line over {@code defaults}. */
    Properties clientConfigs(Properties defaults) {
        Properties merged = new Properties();
        merged.putAll(defaults);
        merged.putAll(clientConfigs);
        return merged;
    }
}
