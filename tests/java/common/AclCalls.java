/*
 * acl-calls, for both client drivers (ClientDriver on rocketmq-client 5.x, ClientDriver49 on 4.9.x): one send, pull,
 * offset commit (UPDATE_CONSUMER_OFFSET) and topic creation (an admin call) by one client signed with
 * --access-key/--secret-key, each printed as DriverMain.outcome reports it, so a test can put what two brokers with
 * the same ACL answer the official client side by side. The send goes through the producer (its own headers and
 * hook); the others through its MQClientAPIImpl to the first master.
 *
 * Compiled into each driver against its own client. The calls are the same in both clients; only the two request
 * headers differ in package (common.protocol.header in 4.9, remoting.protocol.header in 5.x), so each driver builds
 * those (Headers) and everything else is here.
 */

import java.util.Map;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

final class AclCalls {
    /** The two calls whose request headers each client keeps in its own package. */
    interface Headers {
        /**
         * PULL_MESSAGE of queue 0 from offset 0, one message, the subscription "*" coming along, suspended up to
         * ``timeout``/2 until the send before it is in the queue; the PullStatus name.
         */
        String pull(MQClientAPIImpl api, String addr, String group, String topic, long timeout) throws Exception;

        /** UPDATE_CONSUMER_OFFSET of queue 0 to offset 1. */
        void commit(MQClientAPIImpl api, String addr, String group, String topic, long timeout) throws Exception;
    }

    private AclCalls() {
    }

    /** Runs acl-calls with the driver's signing ``hook`` (null: unsigned), client ``instanceName`` and ``headers``. */
    static void run(Args args, RPCHook hook, String instanceName, Headers headers) throws Exception {
        String topic = args.require("topic");
        String group = args.require("group");
        String adminTopic = args.get("admin-topic", topic);
        long timeout = args.getLong("timeout-ms", 10_000);
        DefaultMQProducer producer = new DefaultMQProducer(group, hook);
        producer.setNamesrvAddr(args.require("namesrv"));
        producer.setInstanceName(instanceName);
        producer.setClientIP("127.0.0.1");
        producer.setSendMsgTimeout((int) timeout);
        producer.start();
        try {
            MQClientAPIImpl api = producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
            var broker = api.getBrokerClusterInfo(timeout).getBrokerAddrTable().values().iterator().next();
            String addr = broker.getBrokerAddrs().get(MixAll.MASTER_ID);
            MessageQueue mq = new MessageQueue(topic, broker.getBrokerName(), 0);
            Message msg = new Message(topic, DriverMain.body("acl", 0, 16));
            DriverMain.emit(DriverMain.outcome("send", () -> producer.send(msg, mq, timeout).getSendStatus().name()));
            DriverMain.emit(DriverMain.outcome("pull", () -> headers.pull(api, addr, group, topic, timeout)));
            DriverMain.emit(DriverMain.outcome("commit", () -> {
                headers.commit(api, addr, group, topic, timeout);
                return null;
            }));
            TopicConfig config = new TopicConfig(adminTopic, 1, 1, PermName.PERM_READ | PermName.PERM_WRITE);
            DriverMain.emit(DriverMain.outcome("admin", () -> {
                api.createTopic(addr, "TBW102", config, timeout);
                return null;
            }));
        } finally {
            DriverMain.close(producer::shutdown);
        }
        DriverMain.emit(Map.of("summary", "acl-calls"));
    }
}
