import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.common.message.MessageVersion;
import org.apache.rocketmq.store.MessageExtEncoder;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * Test oracle: Apache RocketMQ's own CommitLog record codec, driven by tests/interop/test_java_codec.py.
 *
 * <pre>
 *   decode FILE          one JSON object per record of FILE (concatenated records), {"error": ...} when Java
 *                        cannot decode one (decoding then stops: the next record's start is unknown)
 *   encode SPEC.json OUT the records Java writes for a JSON list of message specs, concatenated into OUT
 * </pre>
 * Hosts are "ip:port", IPv6 as "[ip]:port"; bodies are base64.
 */
public class CodecOracle {

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("decode")) {
            PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
            decode(Files.readAllBytes(Path.of(args[1])), out);
            out.flush();
        } else if (args.length == 3 && args[0].equals("encode")) {
            Files.write(Path.of(args[2]), encode(Files.readString(Path.of(args[1]), StandardCharsets.UTF_8)));
        } else {
            System.err.println("usage: CodecOracle decode FILE | encode SPEC.json OUT");
            System.exit(2);
        }
    }

    // ---- decode ----------------------------------------------------------------------------------------------

    static void decode(byte[] data, PrintStream out) {
        // Like MessageDecoder.decodes: each decode advances the buffer by the bytes it read, not by TOTALSIZE.
        ByteBuffer buffer = ByteBuffer.wrap(data);
        while (buffer.hasRemaining()) {
            int start = buffer.position();
            MessageExt msg = MessageDecoder.decode(buffer, true, false, false, false, true);
            if (msg == null) {
                out.println(new JSONObject(Map.of("error", "MessageDecoder.decode failed at byte " + start)));
                return;
            }
            JSONObject json = toJson(msg);
            boolean v2 = MessageVersion.valueOfMagicCode(buffer.getInt(start + 4)) == MessageVersion.MESSAGE_VERSION_V2;
            json.put("magic", v2 ? "V2" : "V1");
            out.println(json.toJSONString(JSONWriter.Feature.WriteNulls));
        }
    }

    static JSONObject toJson(MessageExt m) {
        JSONObject o = new JSONObject();
        o.put("storeSize", m.getStoreSize());
        o.put("bodyCRC", m.getBodyCRC());
        o.put("queueId", m.getQueueId());
        o.put("flag", m.getFlag());
        o.put("queueOffset", m.getQueueOffset());
        o.put("commitLogOffset", m.getCommitLogOffset());
        o.put("sysFlag", m.getSysFlag());
        o.put("bornTimestamp", m.getBornTimestamp());
        o.put("bornHost", hostText(m.getBornHost()));
        o.put("storeTimestamp", m.getStoreTimestamp());
        o.put("storeHost", hostText(m.getStoreHost()));
        o.put("reconsumeTimes", m.getReconsumeTimes());
        o.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        o.put("body", m.getBody() == null ? null : Base64.getEncoder().encodeToString(m.getBody()));
        o.put("topic", m.getTopic());
        o.put("properties", m.getProperties() == null ? null : new JSONObject(m.getProperties()));
        o.put("msgId", m.getMsgId());
        return o;
    }

    static String hostText(SocketAddress address) {
        InetSocketAddress socket = (InetSocketAddress) address;
        String ip = socket.getAddress().getHostAddress();
        return (socket.getAddress() instanceof Inet6Address ? "[" + ip + "]" : ip) + ":" + socket.getPort();
    }

    // ---- encode ----------------------------------------------------------------------------------------------

    static byte[] encode(String specs) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Object item : JSON.parseArray(specs)) {
            JSONObject spec = (JSONObject) item;
            out.write("V2".equals(spec.getString("magic")) ? encodeV2(spec) : encodeV1(spec));
        }
        return out.toByteArray();
    }

    /** V1 records: the common codec, which only writes V1 (a one-byte topic length). */
    static byte[] encodeV1(JSONObject spec) throws Exception {
        return MessageDecoder.encode(fill(new MessageExt(), spec), false);
    }

    /** V2 records: the broker's encoder, as CommitLog uses it to append a message. */
    static byte[] encodeV2(JSONObject spec) {
        MessageExtBrokerInner msg = fill(new MessageExtBrokerInner(), spec);
        msg.setVersion(MessageVersion.MESSAGE_VERSION_V2);
        msg.setPropertiesString(MessageDecoder.messageProperties2String(msg.getProperties()));
        MessageExtEncoder encoder = new MessageExtEncoder(new MessageStoreConfig());
        PutMessageResult refused = encoder.encode(msg);
        if (refused != null) {
            throw new IllegalArgumentException("MessageExtEncoder refused: " + refused.getPutMessageStatus());
        }
        ByteBuffer encoded = encoder.getEncoderBuffer();
        // The encoder leaves PHYSICALOFFSET 0; CommitLog's append callback stamps it, as done here.
        encoded.putLong(MessageDecoder.MESSAGE_PHYSIC_OFFSET_POSITION, msg.getCommitLogOffset());
        byte[] record = new byte[encoded.getInt(0)];
        encoded.get(0, record);
        return record;
    }

    static <T extends MessageExt> T fill(T m, JSONObject spec) {
        byte[] body = Base64.getDecoder().decode(spec.getString("body"));
        m.setTopic(spec.getString("topic"));
        m.setBody(body);
        m.setBodyCRC(UtilAll.crc32(body));  // as CommitLog does before encoding
        m.setQueueId(spec.getIntValue("queueId"));
        m.setFlag(spec.getIntValue("flag"));
        m.setQueueOffset(spec.getLongValue("queueOffset"));
        m.setCommitLogOffset(spec.getLongValue("commitLogOffset"));
        m.setSysFlag(spec.getIntValue("sysFlag"));
        m.setBornTimestamp(spec.getLongValue("bornTimestamp"));
        m.setBornHost(parseHost(spec.getString("bornHost")));
        m.setStoreTimestamp(spec.getLongValue("storeTimestamp"));
        m.setStoreHost(parseHost(spec.getString("storeHost")));
        m.setReconsumeTimes(spec.getIntValue("reconsumeTimes"));
        m.setPreparedTransactionOffset(spec.getLongValue("preparedTransactionOffset"));
        // Insertion order is kept so the properties string is byte-for-byte the one the test expects.
        Map<String, String> properties = new LinkedHashMap<>();
        JSONObject given = spec.getJSONObject("properties");
        if (given != null) {
            given.forEach((key, value) -> properties.put(key, (String) value));
        }
        MessageAccessor.setProperties(m, properties);
        return m;
    }

    static InetSocketAddress parseHost(String text) {
        int colon = text.lastIndexOf(':');
        String ip = text.substring(0, colon).replace("[", "").replace("]", "");
        try {
            return new InetSocketAddress(InetAddress.getByName(ip), Integer.parseInt(text.substring(colon + 1)));
        } catch (java.net.UnknownHostException e) {
            throw new IllegalArgumentException("not an ip:port: " + text, e);
        }
    }
}
