import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.processor.TimestampExtractor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.RecordMetadata;

/**
 * Workload K's queries as the Kafka Streams application a careful user would write, run
 * on the broker and the records the Juggler worker reads (bench/peers/kstreams.py).
 *
 *   java -cp 'JARS/*:CLASSES' KStreamsPeer CONFIG.properties
 *
 * This file is the part every query set shares: the records' decoding (Avro single-object
 * encoding, as juggler.codec writes them), the event time taken from the record's `ts`
 * (not the producer's clock), each event's source position, the serdes of what the join
 * stores hold, and the application's settings (exactly_once_v2, RocksDB stores, the
 * defaults otherwise). The topology itself is `Queries.build`, Java that
 * bench/peers/kstreams_topology.py writes from the compiled queries: one filter per
 * stream and query, KStream-KStream joins with JoinWindows of the query's MAXWINDOW,
 * the join and window predicates as filters after the join that first holds their
 * streams. Results go to a topic as text: "query TAB ts TAB stream:partition:offset,...".
 *
 * Prints one JSON line when the application first reaches RUNNING, and one when it
 * has stopped (after SIGTERM).
 */
public final class KStreamsPeer {

    static String[] STREAMS;

    // -- serdes of what the stores and changelogs hold ---------------------------------

    static void writeEv(DataOutputStream out, Ev e) throws IOException {
        out.writeByte(e.stream);
        out.writeLong(e.ts);
        out.writeInt(e.partition);
        out.writeLong(e.offset);
        out.writeByte(e.v.length);
        for (double d : e.v) {
            out.writeDouble(d);
        }
    }

    static Ev readEv(DataInputStream in) throws IOException {
        int stream = in.readByte();
        long ts = in.readLong();
        int partition = in.readInt();
        long offset = in.readLong();
        double[] v = new double[in.readByte()];
        for (int i = 0; i < v.length; i++) {
            v[i] = in.readDouble();
        }
        return new Ev(stream, ts, partition, offset, v);
    }

    interface Writer<T> {
        void write(DataOutputStream out, T value) throws IOException;
    }

    interface Reader<T> {
        T read(DataInputStream in) throws IOException;
    }

    static <T> Serde<T> serde(Writer<T> writer, Reader<T> reader) {
        Serializer<T> ser = (topic, value) -> {
            if (value == null) {
                return null;
            }
            ByteArrayOutputStream bytes = new ByteArrayOutputStream(64);
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                writer.write(out, value);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return bytes.toByteArray();
        };
        Deserializer<T> de = (topic, data) -> {
            if (data == null) {
                return null;
            }
            try (DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(data))) {
                return reader.read(in);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        };
        return Serdes.serdeFrom(ser, de);
    }

    public static final Serde<Ev> EV = serde(KStreamsPeer::writeEv, KStreamsPeer::readEv);
    public static final Serde<Row> ROW = serde((out, r) -> {
        int mask = 0;
        for (int i = 0; i < r.e.length; i++) {
            mask |= r.e[i] != null ? 1 << i : 0;
        }
        out.writeByte(r.e.length);
        out.writeByte(mask);
        for (Ev x : r.e) {
            if (x != null) {
                writeEv(out, x);
            }
        }
    }, in -> {
        Ev[] e = new Ev[in.readByte()];
        int mask = in.readByte();
        for (int i = 0; i < e.length; i++) {
            if ((mask & (1 << i)) != 0) {
                e[i] = readEv(in);
            }
        }
        return new Row(e);
    });

    // -- the records on the stream topics ----------------------------------------------

    /** A stream topic's values: Avro single-object encoding of the stream's schema. */
    static Deserializer<Ev> avro(int stream, Schema schema, String[] columns) {
        BinaryMessageDecoder<GenericRecord> decoder =
                new BinaryMessageDecoder<>(GenericData.get(), schema);
        return (topic, data) -> {
            GenericRecord record;
            try {
                record = decoder.decode(ByteBuffer.wrap(data));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            double[] v = new double[columns.length];
            for (int i = 0; i < columns.length; i++) {
                Object x = record.get(columns[i]);
                v[i] = x instanceof Boolean ? ((Boolean) x ? 1.0 : 0.0) : ((Number) x).doubleValue();
            }
            return new Ev(stream, (Long) record.get("ts"), -1, -1L, v);
        };
    }

    /** Event time is the record's `ts`, as Juggler's. */
    static final class EventTime implements TimestampExtractor {
        @Override
        public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
            return ((Ev) record.value()).ts;
        }
    }

    /** Stamps each event with its source position (what a result names). */
    static final class Positioned implements FixedKeyProcessor<String, Ev, Ev> {
        private FixedKeyProcessorContext<String, Ev> context;

        @Override
        public void init(FixedKeyProcessorContext<String, Ev> context) {
            this.context = context;
        }

        @Override
        public void process(FixedKeyRecord<String, Ev> record) {
            RecordMetadata where = context.recordMetadata().orElseThrow();
            context.forward(record.withValue(record.value().at(where.partition(), where.offset())));
        }
    }

    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        try (var in = Files.newBufferedReader(Paths.get(args[0]))) {
            config.load(in);
        }
        String prefix = config.getProperty("topic.prefix");
        Path schemas = Paths.get(config.getProperty("schemas"));
        STREAMS = Queries.STREAMS;

        StreamsBuilder builder = new StreamsBuilder();
        Map<String, KStream<String, Ev>> sources = new HashMap<>();
        for (int s = 0; s < Queries.STREAMS.length; s++) {
            String name = Queries.STREAMS[s];
            Schema schema = new Schema.Parser().parse(schemas.resolve(name + ".avsc").toFile());
            Serde<Ev> values = Serdes.serdeFrom(EV.serializer(), avro(s, schema, Queries.COLUMNS[s]));
            KStream<String, Ev> stream = builder.stream(prefix + "juggler.stream." + name,
                    Consumed.with(Serdes.String(), values).withTimestampExtractor(new EventTime())
                            .withName("read-" + name));
            sources.put(name, stream.processValues(Positioned::new, Named.as("position-" + name)));
        }
        Queries.build(sources, config.getProperty("results.topic"));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, config.getProperty("application.id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, config.getProperty("bootstrap"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, config.getProperty("state.dir"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, config.getProperty("threads"));
        props.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG, config.getProperty("max.task.idle.ms", "0"));
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        long started = System.nanoTime();
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        boolean[] running = {false};
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && !running[0]) {
                running[0] = true;
                System.out.printf("{\"state\": \"RUNNING\", \"seconds\": %.3f}%n",
                        (System.nanoTime() - started) / 1e9);
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(60));
            System.out.println("{\"state\": \"STOPPED\"}");
            System.out.flush();
        }));
        streams.start();
        stopped.await();
        if (streams.state() == KafkaStreams.State.ERROR) {  // not a SIGTERM: say so, and fail
            System.out.println("{\"state\": \"ERROR\"}");
            System.out.flush();
            Runtime.getRuntime().halt(1);
        }
    }
}

/** One event of a stream, with where it was read: the values by column index. */
final class Ev {
    public final int stream;
    public final long ts;
    public final int partition;
    public final long offset;
    public final double[] v;

    public Ev(int stream, long ts, int partition, long offset, double[] v) {
        this.stream = stream;
        this.ts = ts;
        this.partition = partition;
        this.offset = offset;
        this.v = v;
    }

    Ev at(int partition, long offset) {
        return new Ev(stream, ts, partition, offset, v);
    }
}

/** A partial or whole result: one event per stream of the query, in FROM order. */
final class Row {
    public final Ev[] e;

    public Row(Ev[] e) {
        this.e = e;
    }

    public static Row of(int width, int i, Ev a, int j, Ev b) {
        Ev[] e = new Ev[width];
        e[i] = a;
        e[j] = b;
        return new Row(e);
    }

    public Row with(int i, Ev c) {
        Ev[] copy = e.clone();
        copy[i] = c;
        return new Row(copy);
    }

    /** The result's text: query, timestamp (the newest event's), source positions. */
    public String result(String query) {
        long ts = Long.MIN_VALUE;
        StringBuilder sources = new StringBuilder();
        for (Ev x : e) {
            ts = Math.max(ts, x.ts);
            if (sources.length() > 0) {
                sources.append(',');
            }
            sources.append(KStreamsPeer.STREAMS[x.stream]).append(':').append(x.partition).append(':')
                    .append(x.offset);
        }
        return query + "\t" + ts + "\t" + sources;
    }
}
