/*
 * Apache RocketMQ's own NameServer request processors as an oracle for rmq's broker/namesrv (tests/unit/namesrv).
 *
 *   run <script.json> <kvConfigPath>
 *
 * The script is a JSON object {"config": {key: value, ...}, "steps": [...]}. The config keys go to NamesrvConfig as
 * namesrv.conf would (MixAll.properties2Object). Each step is either a request
 *   {"conn": 1, "code": 103, "version": 515, "extFields": {...}, "body": "<base64>"}
 * handled on connection <conn> by the processor NamesrvController registers for that code (ClientRequestProcessor
 * for GET_ROUTEINFO_BY_TOPIC, DefaultRequestProcessor otherwise), or a connection close
 *   {"close": 1}
 * which is BrokerHousekeepingService.onChannelClose. For each step one JSON line goes to stdout:
 *   {"code": .., "remark": .., "extFields": {..}, "body": "<base64>"}   (an exception: SYSTEM_ERROR, as
 *                                                                       NettyRemotingAbstract answers it)
 *   {"closed": 1}
 *
 * The controller is constructed, never started: no ports, no threads. The one difference from a running NameServer
 * is that unregistrations (UNREGISTER_BROKER, closed channels) run at once instead of in BatchUnregistrationService's
 * thread, so each step sees the effect of the previous one, as it would a moment later in a real NameServer.
 */

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONObject;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.embedded.EmbeddedChannel;
import java.lang.reflect.Field;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.namesrv.processor.ClientRequestProcessor;
import org.apache.rocketmq.namesrv.processor.DefaultRequestProcessor;
import org.apache.rocketmq.namesrv.routeinfo.BatchUnregistrationService;
import org.apache.rocketmq.namesrv.routeinfo.RouteInfoManager;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RemotingSysResponseCode;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.header.namesrv.UnRegisterBrokerRequestHeader;

public class NamesrvOracle {
    public static void main(String[] args) throws Exception {
        if (args.length != 3 || !args[0].equals("run")) {
            System.err.println("usage: NamesrvOracle run <script.json> <kvConfigPath>");
            System.exit(2);
        }
        JSONObject script = JSON.parseObject(Files.readAllBytes(Paths.get(args[1])));
        NamesrvConfig config = new NamesrvConfig();
        config.setKvConfigPath(args[2]);
        Properties props = new Properties();
        JSONObject conf = script.getJSONObject("config");
        if (conf != null) {
            for (String key : conf.keySet()) {
                props.setProperty(key, conf.getString(key));
            }
        }
        MixAll.properties2Object(props, config);
        NamesrvController controller = new NamesrvController(config, new NettyServerConfig());
        controller.getKvConfigManager().load();
        RouteInfoManager routes = controller.getRouteInfoManager();
        synchronousUnregistration(routes, config);
        ClientRequestProcessor client = new ClientRequestProcessor(controller);
        DefaultRequestProcessor processor = new DefaultRequestProcessor(controller);
        Map<Integer, Channel> channels = new HashMap<>();
        for (Object item : script.getJSONArray("steps")) {
            JSONObject step = (JSONObject) item;
            if (step.containsKey("close")) {
                Channel channel = channels.get(step.getInteger("close"));
                if (channel != null) {
                    routes.onChannelDestroy(channel);
                }
                System.out.println(JSON.toJSONString(Collections.singletonMap("closed", step.getInteger("close"))));
                continue;
            }
            Channel channel = channels.computeIfAbsent(step.getInteger("conn"), id -> new EmbeddedChannel());
            RemotingCommand request = request(step);
            RemotingCommand response;
            try {
                response = request.getCode() == RequestCode.GET_ROUTEINFO_BY_TOPIC
                    ? client.processRequest(context(channel), request)
                    : processor.processRequest(context(channel), request);
            } catch (Exception e) {
                response = RemotingCommand.createResponseCommand(RemotingSysResponseCode.SYSTEM_ERROR,
                    UtilAll.exceptionSimpleDesc(e));
            }
            System.out.println(JSON.toJSONString(describe(response)));
        }
        System.out.flush();
        System.exit(0);
    }

    /** BatchUnregistrationService with submit() doing the work at once (its queue thread is never started). */
    static void synchronousUnregistration(RouteInfoManager routes, NamesrvConfig config) throws Exception {
        BatchUnregistrationService now = new BatchUnregistrationService(routes, config) {
            @Override
            public boolean submit(UnRegisterBrokerRequestHeader request) {
                routes.unRegisterBroker(Collections.singleton(request));
                return true;
            }
        };
        Field field = RouteInfoManager.class.getDeclaredField("unRegisterService");
        field.setAccessible(true);
        field.set(routes, now);
    }

    static RemotingCommand request(JSONObject step) {
        RemotingCommand request = RemotingCommand.createRequestCommand(step.getIntValue("code"), null);
        request.setVersion(step.getIntValue("version"));
        HashMap<String, String> ext = new HashMap<>();
        JSONObject fields = step.getJSONObject("extFields");
        if (fields != null) {
            for (String key : fields.keySet()) {
                ext.put(key, fields.getString(key));
            }
        }
        request.setExtFields(ext);
        String body = step.getString("body");
        if (body != null && !body.isEmpty()) {
            request.setBody(Base64.getDecoder().decode(body));
        }
        return request;
    }

    static ChannelHandlerContext context(Channel channel) {
        return (ChannelHandlerContext) Proxy.newProxyInstance(NamesrvOracle.class.getClassLoader(),
            new Class<?>[] {ChannelHandlerContext.class},
            (proxy, method, args) -> method.getName().equals("channel") ? channel : null);
    }

    static Map<String, Object> describe(RemotingCommand response) {
        response.makeCustomHeaderToNet();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("code", response.getCode());
        out.put("remark", response.getRemark());
        out.put("extFields", response.getExtFields() == null ? Collections.emptyMap() : response.getExtFields());
        byte[] body = response.getBody();
        out.put("body", body == null ? "" : Base64.getEncoder().encodeToString(body));
        return out;
    }
}
