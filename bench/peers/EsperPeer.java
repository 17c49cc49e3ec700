import com.espertech.esper.common.client.EPCompiled;
import com.espertech.esper.common.client.EventBean;
import com.espertech.esper.common.client.configuration.Configuration;
import com.espertech.esper.compiler.client.CompilerArguments;
import com.espertech.esper.compiler.client.EPCompilerProvider;
import com.espertech.esper.runtime.client.EPDeployment;
import com.espertech.esper.runtime.client.EPEventService;
import com.espertech.esper.runtime.client.EPRuntime;
import com.espertech.esper.runtime.client.EPRuntimeProvider;
import com.espertech.esper.runtime.client.EPStatement;
import com.espertech.esper.runtime.client.UpdateListener;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Esper as a benchmark peer of Juggler (bench/peers/esper.py compiles and runs it).
 *
 * <pre>java -cp 'ESPER_JARS/*:CLASSES' EsperPeer EVENTS_DIR QUERIES_FILE RESULTS_FILE</pre>
 *
 * EVENTS_DIR holds schema.tsv and events.csv (bench/peers/files.py); QUERIES_FILE has one
 * "id TAB epl" line per query (bench/peers/epl.py). Everything is read and every
 * statement compiled and deployed before the clock starts; the timed loop only advances
 * the external clock to each event's ts and sends the event, as Juggler's timed loop
 * only calls process(). Results (query id TAB positions in FROM order) are kept in
 * memory and written after timing; one JSON line of measurements goes to stdout.
 */
public final class EsperPeer {
    private static final class Results {
        final List<String> ids;
        long[] data = new long[1 << 16];
        int size;
        long count;

        Results(List<String> ids) {
            this.ids = ids;
        }

        void add(int query, EventBean row, int width) {
            if (size + width + 1 > data.length) {
                data = java.util.Arrays.copyOf(data, Math.max(data.length * 2, size + width + 1));
            }
            data[size++] = query;
            for (int i = 0; i < width; i++) {
                data[size++] = (Long) row.get("p" + i);
            }
            count++;
        }

        void write(Path out, int[] widths) throws IOException {
            try (BufferedWriter w = Files.newBufferedWriter(out)) {
                int i = 0;
                while (i < size) {
                    int query = (int) data[i++];
                    StringBuilder line = new StringBuilder(ids.get(query)).append('\t');
                    for (int j = 0; j < widths[query]; j++) {
                        if (j > 0) line.append(',');
                        line.append(data[i++]);
                    }
                    w.write(line.append('\n').toString());
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: EsperPeer EVENTS_DIR QUERIES_FILE RESULTS_FILE");
            System.exit(2);
        }
        Path dir = Paths.get(args[0]);
        Configuration config = new Configuration();
        config.getRuntime().getThreading().setInternalTimerEnabled(false);
        Map<String, String> streams = new HashMap<>();  // interned names, one instance each
        Map<String, Integer> widths = new HashMap<>();
        for (String line : Files.readAllLines(dir.resolve("schema.tsv"))) {
            String[] parts = line.split("\t", -1);
            String[] columns = parts[1].isEmpty() ? new String[0] : parts[1].split(",");
            String[] names = new String[3 + columns.length];
            Object[] types = new Object[3 + columns.length];
            names[0] = "__key"; types[0] = String.class;
            names[1] = "ts"; types[1] = Long.class;
            names[2] = "__pos"; types[2] = Long.class;
            for (int i = 0; i < columns.length; i++) {
                names[3 + i] = columns[i];
                types[3 + i] = Double.class;
            }
            config.getCommon().addEventType(parts[0], names, types);
            streams.put(parts[0], parts[0]);
            widths.put(parts[0], columns.length);
        }

        List<String> eventStream = new ArrayList<>();
        List<Object[]> eventRows = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(dir.resolve("events.csv"))) {
            String line;
            while ((line = r.readLine()) != null) {
                String[] f = line.split(",", -1);
                String stream = streams.get(f[0]);
                Object[] row = new Object[3 + widths.get(stream)];
                row[0] = f[1];
                row[1] = Long.parseLong(f[2]);
                row[2] = Long.parseLong(f[3]);
                for (int i = 4; i < f.length; i++) {
                    row[i - 1] = Double.parseDouble(f[i]);
                }
                eventStream.add(stream);
                eventRows.add(row);
            }
        }

        List<String> ids = new ArrayList<>();
        StringBuilder module = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[1]))) {
            int tab = line.indexOf('\t');
            ids.add(line.substring(0, tab));
            module.append(line.substring(tab + 1)).append(";\n");
        }

        long t0 = System.nanoTime();
        EPCompiled compiled = EPCompilerProvider.getCompiler()
                .compile(module.toString(), new CompilerArguments(config));
        long t1 = System.nanoTime();
        EPRuntime runtime = EPRuntimeProvider.getRuntime("juggler-bench", config);
        EPEventService events = runtime.getEventService();
        events.clockExternal();
        long now = eventRows.isEmpty() ? 0 : (Long) eventRows.get(0)[1];
        events.advanceTime(now);
        EPDeployment deployment = runtime.getDeploymentService().deploy(compiled);
        Map<String, Integer> index = new HashMap<>();
        for (int i = 0; i < ids.size(); i++) {
            index.put(ids.get(i), i);
        }
        Results results = new Results(ids);
        int[] resultWidths = new int[ids.size()];
        for (EPStatement statement : deployment.getStatements()) {
            int query = index.get(statement.getName());
            int width = statement.getEventType().getPropertyNames().length;
            resultWidths[query] = width;
            UpdateListener listener = (newEvents, oldEvents, st, rt) -> {
                if (newEvents != null) {
                    for (EventBean row : newEvents) {
                        results.add(query, row, width);
                    }
                }
            };
            statement.addListener(listener);
        }
        long t2 = System.nanoTime();

        int n = eventRows.size();
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            Object[] row = eventRows.get(i);
            long ts = (Long) row[1];
            if (ts != now) {
                events.advanceTime(ts);
                now = ts;
            }
            events.sendEventObjectArray(row, eventStream.get(i));
        }
        long end = System.nanoTime();

        double seconds = (end - start) / 1e9;
        long peak = peakRssKb();
        results.write(Paths.get(args[2]), resultWidths);
        System.out.printf(java.util.Locale.ROOT,
                "{\"events\": %d, \"seconds\": %.6f, \"events_per_s\": %.3f, \"results\": %d, "
                        + "\"compile_s\": %.3f, \"deploy_s\": %.3f, \"peak_rss_kb\": %d, "
                        + "\"max_heap_kb\": %d}%n",
                n, seconds, seconds > 0 ? n / seconds : 0.0, results.count,
                (t1 - t0) / 1e9, (t2 - t1) / 1e9, peak, Runtime.getRuntime().maxMemory() / 1024);
        runtime.destroy();
    }

    /** The process's peak resident set (VmHWM), what ru_maxrss is for the Python side. */
    private static long peakRssKb() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return -1;
    }
}
