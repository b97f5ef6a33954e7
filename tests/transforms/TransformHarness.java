// The reference side of the differential test of our transforms: Apache Kafka's own classes (connect-transforms)
// run on the cases the test writes. Run in Java's source-file mode, no build step:
//   java -cp '<kafka-transforms jars>/*' TransformHarness.java < cases.json > results.json
// cases.json: [{"config": {flat transforms./predicates. keys}, "records": [{"topic", "partition", "offset",
// "timestamp", "key", "value" (JsonConverter bytes as text, or null), "key_schemas", "value_schemas",
// "headers": [[name, text]], and optionally "value_avro": {"schema": Avro schema text, "data": base64 of the datum's
// binary encoding}, read by Apicurio's AvroData as its AvroConverter reads a registry's Avro}]}]. Each record's result: {"dropped": true}, {"error": "..."} or the record after the
// chain, its key, value and headers written by JsonConverter with schemas.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.apicurio.registry.utils.converter.avro.AvroData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.io.DecoderFactory;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

public class TransformHarness {
    static final ObjectMapper JSON = new ObjectMapper();
    static final AvroData AVRO = new AvroData(100);

    record Stage(Transformation<SinkRecord> transform, Predicate<SinkRecord> predicate, boolean negate) {}

    public static void main(String[] args) throws Exception {
        JsonNode cases = JSON.readTree(System.in);
        ArrayNode out = JSON.createArrayNode();
        for (JsonNode testCase : cases) {
            ArrayNode results = out.addArray();
            List<Stage> chain;
            try {
                chain = chain(testCase.get("config"));
            } catch (Exception e) {
                results.addObject().put("config_error", e.toString());
                continue;
            }
            for (JsonNode record : testCase.get("records")) {
                results.add(run(chain, record));
            }
        }
        System.out.println(JSON.writeValueAsString(out));
    }

    static Map<String, String> keysUnder(JsonNode config, String prefix) {
        Map<String, String> keys = new HashMap<>();
        for (Iterator<String> it = config.fieldNames(); it.hasNext(); ) {
            String key = it.next();
            if (key.startsWith(prefix)) keys.put(key.substring(prefix.length()), config.get(key).asText());
        }
        return keys;
    }

    static List<String> aliases(JsonNode config, String key) {
        List<String> aliases = new ArrayList<>();
        if (config.has(key)) for (String alias : config.get(key).asText().split(",")) {
            if (!alias.isBlank()) aliases.add(alias.trim());
        }
        return aliases;
    }

    @SuppressWarnings("unchecked")
    static List<Stage> chain(JsonNode config) throws Exception {
        Map<String, Predicate<SinkRecord>> predicates = new HashMap<>();
        for (String alias : aliases(config, "predicates")) {
            Map<String, String> keys = keysUnder(config, "predicates." + alias + ".");
            Predicate<SinkRecord> predicate = (Predicate<SinkRecord>) Class.forName(keys.remove("type"))
                .getDeclaredConstructor().newInstance();
            predicate.configure(keys);
            predicates.put(alias, predicate);
        }
        List<Stage> stages = new ArrayList<>();
        for (String alias : aliases(config, "transforms")) {
            Map<String, String> keys = keysUnder(config, "transforms." + alias + ".");
            Transformation<SinkRecord> transform = (Transformation<SinkRecord>) Class.forName(keys.remove("type"))
                .getDeclaredConstructor().newInstance();
            String predicate = keys.remove("predicate");
            boolean negate = Boolean.parseBoolean(keys.remove("negate"));
            transform.configure(keys);
            stages.add(new Stage(transform, predicate == null ? null : predicates.get(predicate), negate));
        }
        return stages;
    }

    static JsonConverter converter(boolean schemas, boolean isKey) {
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", String.valueOf(schemas), "converter.type", isKey ? "key" : "value"));
        return converter;
    }

    static byte[] bytes(JsonNode text) {
        return text == null || text.isNull() ? null : text.asText().getBytes(StandardCharsets.UTF_8);
    }

    static SchemaAndValue avro(JsonNode value) throws Exception {
        org.apache.avro.Schema schema = new org.apache.avro.Schema.Parser().parse(value.get("schema").asText());
        byte[] data = Base64.getDecoder().decode(value.get("data").asText());
        Object datum = new GenericDatumReader<Object>(schema).read(null, DecoderFactory.get().binaryDecoder(data, null));
        return AVRO.toConnectData(schema, datum);
    }

    static JsonNode written(String topic, org.apache.kafka.connect.data.Schema schema, Object value) throws Exception {
        byte[] data = converter(true, false).fromConnectData(topic, schema, value);
        return data == null ? null : JSON.readTree(data);
    }

    static ObjectNode run(List<Stage> chain, JsonNode in) {
        ObjectNode result = JSON.createObjectNode();
        try {
            String topic = in.get("topic").asText();
            SchemaAndValue key = converter(in.get("key_schemas").asBoolean(), true).toConnectData(topic, bytes(in.get("key")));
            SchemaAndValue value = in.has("value_avro") ? avro(in.get("value_avro"))
                : converter(in.get("value_schemas").asBoolean(), false).toConnectData(topic, bytes(in.get("value")));
            ConnectHeaders headers = new ConnectHeaders();
            for (JsonNode header : in.get("headers")) headers.addString(header.get(0).asText(), header.get(1).asText());
            Long timestamp = in.get("timestamp").isNull() ? null : in.get("timestamp").asLong();
            SinkRecord record = new SinkRecord(topic, in.get("partition").asInt(), key.schema(), key.value(),
                value.schema(), value.value(), in.get("offset").asLong(), timestamp,
                timestamp == null ? TimestampType.NO_TIMESTAMP_TYPE : TimestampType.CREATE_TIME, headers);
            for (Stage stage : chain) {
                if (stage.predicate() != null && stage.predicate().test(record) == stage.negate()) continue;
                record = stage.transform().apply(record);
                if (record == null) return result.put("dropped", true);
            }
            result.put("topic", record.topic());
            result.put("partition", record.kafkaPartition());
            if (record.timestamp() == null) result.putNull("timestamp"); else result.put("timestamp", record.timestamp());
            result.set("key", written(record.topic(), record.keySchema(), record.key()));
            result.set("value", written(record.topic(), record.valueSchema(), record.value()));
            ArrayNode headerList = result.putArray("headers");
            for (Header header : record.headers()) {
                headerList.addArray().add(header.key()).add(written(record.topic(), header.schema(), header.value()));
            }
        } catch (Exception e) {
            result.removeAll();
            result.put("error", e.toString());
        }
        return result;
    }
}
