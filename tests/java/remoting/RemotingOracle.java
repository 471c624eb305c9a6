import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.SerializeType;

/**
 * Test oracle: Apache RocketMQ's own RemotingCommand codec, driven by tests/unit/remoting/test_java_oracle.py.
 *
 * <pre>
 *   encode SPEC.json OUT  the frames Java writes (NettyEncoder's path: fastEncodeHeader, then the body) for a JSON
 *                         list of command specs, concatenated into OUT
 *   decode FILE           one JSON object per frame of FILE (concatenated frames, each with its 4-byte length), as
 *                         RemotingCommand.decode reads it after NettyDecoder stripped the length; {"error": ...}
 *                         when Java rejects a frame
 *   codes                 every constant of RequestCode, RemotingSysResponseCode + ResponseCode, LanguageCode, and
 *                         MQVersion.CURRENT_VERSION, as one JSON object
 * </pre>
 * A spec: code, language (enum name), version, opaque, flag, remark (may be null), extFields (an object, insertion
 * order kept, or null), body (base64), serializeType ("JSON" | "ROCKETMQ").
 */
public class RemotingOracle {

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("decode")) {
            PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
            decode(Files.readAllBytes(Path.of(args[1])), out);
            out.flush();
        } else if (args.length == 1 && args[0].equals("codes")) {
            PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
            out.println(codes().toJSONString());
            out.flush();
        } else if (args.length == 3 && args[0].equals("encode")) {
            Files.write(Path.of(args[2]), encode(Files.readString(Path.of(args[1]), StandardCharsets.UTF_8)));
        } else {
            System.err.println("usage: RemotingOracle decode FILE | encode SPEC.json OUT | codes");
            System.exit(2);
        }
    }

    // ---- decode ----------------------------------------------------------------------------------------------

    static void decode(byte[] data, PrintStream out) {
        ByteBuffer buffer = ByteBuffer.wrap(data);
        while (buffer.remaining() >= 4) {
            int length = buffer.getInt();
            byte[] frame = new byte[Math.min(Math.max(length, 0), buffer.remaining())];
            buffer.get(frame);
            JSONObject json;
            try {
                json = toJson(RemotingCommand.decode(frame));
            } catch (Throwable e) {
                json = new JSONObject();
                json.put("error", e.toString());
            }
            out.println(json.toJSONString(JSONWriter.Feature.WriteNulls));
        }
    }

    static JSONObject toJson(RemotingCommand cmd) {
        JSONObject o = new JSONObject();
        o.put("code", cmd.getCode());
        o.put("language", cmd.getLanguage() == null ? null : cmd.getLanguage().name());
        o.put("version", cmd.getVersion());
        o.put("opaque", cmd.getOpaque());
        o.put("flag", cmd.getFlag());
        o.put("remark", cmd.getRemark());
        o.put("extFields", cmd.getExtFields() == null ? null : new JSONObject(cmd.getExtFields()));
        o.put("body", cmd.getBody() == null ? null : Base64.getEncoder().encodeToString(cmd.getBody()));
        o.put("serializeType", cmd.getSerializeTypeCurrentRPC().name());
        o.put("isResponse", cmd.isResponseType());
        o.put("isOneway", cmd.isOnewayRPC());
        return o;
    }

    // ---- codes -----------------------------------------------------------------------------------------------

    static JSONObject codes() throws IllegalAccessException {
        JSONObject o = new JSONObject();
        o.put("RequestCode", constants(RequestCode.class));
        // ResponseCode extends RemotingSysResponseCode: getFields() returns the inherited constants too.
        o.put("ResponseCode", constants(ResponseCode.class));
        JSONObject languages = new JSONObject();
        for (LanguageCode language : LanguageCode.values()) {
            languages.put(language.name(), (int) language.getCode());
        }
        o.put("LanguageCode", languages);
        JSONObject types = new JSONObject();
        for (SerializeType type : SerializeType.values()) {
            types.put(type.name(), (int) type.getCode());
        }
        o.put("SerializeType", types);
        o.put("CURRENT_VERSION", MQVersion.CURRENT_VERSION);
        o.put("V5_3_1", MQVersion.Version.V5_3_1.ordinal());
        return o;
    }

    static JSONObject constants(Class<?> table) throws IllegalAccessException {
        JSONObject o = new JSONObject();
        for (Field field : table.getFields()) {
            if (Modifier.isStatic(field.getModifiers()) && Modifier.isFinal(field.getModifiers())) {
                o.put(field.getName(), ((Number) field.get(null)).intValue());
            }
        }
        return o;
    }

    // ---- encode ----------------------------------------------------------------------------------------------

    static byte[] encode(String specs) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Object item : JSON.parseArray(specs)) {
            RemotingCommand cmd = fromSpec((JSONObject) item);
            ByteBuf buf = Unpooled.buffer();
            cmd.fastEncodeHeader(buf);
            if (cmd.getBody() != null) {
                buf.writeBytes(cmd.getBody());
            }
            byte[] frame = new byte[buf.readableBytes()];
            buf.readBytes(frame);
            // The older whole-frame encoder must agree with Netty's path, or the oracle itself is ambiguous.
            ByteBuffer whole = cmd.encode();
            byte[] older = new byte[whole.remaining()];
            whole.get(older);
            if (!Arrays.equals(frame, older)) {
                throw new IllegalStateException("RemotingCommand.encode() and fastEncodeHeader disagree for " + cmd);
            }
            out.write(frame);
        }
        return out.toByteArray();
    }

    static RemotingCommand fromSpec(JSONObject spec) {
        RemotingCommand cmd = RemotingCommand.createRequestCommand(spec.getIntValue("code"), null);
        cmd.setLanguage(LanguageCode.valueOf(spec.getString("language")));
        cmd.setVersion(spec.getIntValue("version"));
        cmd.setOpaque(spec.getIntValue("opaque"));
        cmd.setFlag(spec.getIntValue("flag"));
        cmd.setRemark(spec.getString("remark"));
        JSONObject ext = spec.getJSONObject("extFields");
        if (ext != null) {
            // A LinkedHashMap is a HashMap, so the insertion order the test chose is the order on the wire.
            LinkedHashMap<String, String> fields = new LinkedHashMap<>();
            ext.forEach((key, value) -> fields.put(key, (String) value));
            cmd.setExtFields(fields);
        }
        String body = spec.getString("body");
        if (body != null && !body.isEmpty()) {
            cmd.setBody(Base64.getDecoder().decode(body));
        }
        cmd.setSerializeTypeCurrentRPC(SerializeType.valueOf(spec.getString("serializeType")));
        return cmd;
    }
}
