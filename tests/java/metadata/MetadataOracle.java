/*
 * Apache RocketMQ's own metadata managers as an oracle for rmq's broker/server/metadata (tests/unit/metadata).
 *
 *   write <storeRoot> <brokerName>   a broker's life in miniature: topics created the ways a broker creates them,
 *                                    groups, forbidden bits and offsets, each persisted twice (so .bak exists too)
 *                                    with the real ConfigManager.persist into <storeRoot>/config/
 *   read <storeRoot> <brokerName>    load <storeRoot>/config/ with the real ConfigManager.load and print, one line
 *                                    each, the compact JSON of TopicConfigManager, SubscriptionGroupManager and
 *                                    ConsumerOffsetManager as loaded
 *   validate <hex> ...               for each name (UTF-8, hex-encoded so that any character can pass), one JSON
 *                                    line [topicValid, topicRemark, groupValid, groupRemark] from TopicValidator
 *
 * The managers belong to a BrokerController that is constructed but never started: no ports, no threads.
 */

import com.alibaba.fastjson2.JSON;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.topic.TopicValidator;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.subscription.ExponentialRetryPolicy;
import org.apache.rocketmq.remoting.protocol.subscription.GroupRetryPolicy;
import org.apache.rocketmq.remoting.protocol.subscription.GroupRetryPolicyType;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;

public class MetadataOracle {
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("validate")) {
            validate(Arrays.copyOfRange(args, 1, args.length));
            System.exit(0);
        }
        if (args.length != 3) {
            System.err.println("usage: MetadataOracle write|read <storeRoot> <brokerName> | validate <hex>...");
            System.exit(2);
        }
        switch (args[0]) {
            case "write":
                write(controller(args[1], args[2]));
                break;
            case "read":
                read(controller(args[1], args[2]));
                break;
            default:
                System.err.println("unknown command " + args[0]);
                System.exit(2);
        }
        System.exit(0);  // the controller's constructor may leave non-daemon threads behind
    }

    static BrokerController controller(String storeRoot, String brokerName) {
        BrokerConfig brokerConfig = new BrokerConfig();
        brokerConfig.setBrokerName(brokerName);
        brokerConfig.setBrokerClusterName("DefaultCluster");
        MessageStoreConfig storeConfig = new MessageStoreConfig();
        storeConfig.setStorePathRootDir(storeRoot);
        return new BrokerController(brokerConfig, new NettyServerConfig(), new NettyClientConfig(), storeConfig);
    }

    static void write(BrokerController c) {
        TopicConfig topic = new TopicConfig("TopicTest", 4, 4, PermName.PERM_READ | PermName.PERM_WRITE);
        Map<String, String> attributes = new HashMap<>();
        attributes.put("+message.type", "NORMAL");
        topic.setAttributes(attributes);
        c.getTopicConfigManager().updateTopicConfig(topic);
        TopicConfig ordered = new TopicConfig("OrderTopic", 2, 2, PermName.PERM_READ | PermName.PERM_WRITE);
        ordered.setOrder(true);
        c.getTopicConfigManager().updateTopicConfig(ordered);
        c.getTopicConfigManager().createTopicInSendMessageMethod("AutoTopic", "TBW102", "127.0.0.1:50000", 4, 0);
        c.getTopicConfigManager().createTopicInSendMessageBackMethod("%RETRY%GID_test", 1,
            PermName.PERM_READ | PermName.PERM_WRITE, 0);
        c.getTopicConfigManager().createTopicInSendMessageBackMethod("%DLQ%GID_test", 1,
            PermName.PERM_READ | PermName.PERM_WRITE, 0);

        c.getSubscriptionGroupManager().findSubscriptionGroupConfig("GID_test");
        SubscriptionGroupConfig custom = new SubscriptionGroupConfig();
        custom.setGroupName("GID_custom");
        custom.setRetryMaxTimes(3);
        custom.setConsumeBroadcastEnable(false);
        custom.setConsumeMessageOrderly(true);
        GroupRetryPolicy policy = new GroupRetryPolicy();
        policy.setType(GroupRetryPolicyType.EXPONENTIAL);
        policy.setExponentialRetryPolicy(new ExponentialRetryPolicy(1000, 60000, 3));
        custom.setGroupRetryPolicy(policy);
        c.getSubscriptionGroupManager().updateSubscriptionGroupConfig(custom);
        c.getSubscriptionGroupManager().setForbidden("GID_test", "TopicTest", 1);

        c.getConsumerOffsetManager().commitOffset("127.0.0.1", "GID_test", "TopicTest", 0, 250L);
        c.getConsumerOffsetManager().commitOffset("127.0.0.1", "GID_test", "TopicTest", 3, 7L);
        c.getConsumerOffsetManager().commitOffset("127.0.0.1", "GID_custom", "TopicTest", 1, 12345678901L);
        c.getConsumerOffsetManager().commitOffset("127.0.0.1", "GID_test", "%RETRY%GID_test", 0, 2L);

        for (int i = 0; i < 2; i++) {
            c.getTopicConfigManager().persist();
            c.getSubscriptionGroupManager().persist();
            c.getConsumerOffsetManager().persist();
        }
    }

    static void read(BrokerController c) {
        require(c.getTopicConfigManager().load(), "topics.json");
        require(c.getSubscriptionGroupManager().load(), "subscriptionGroup.json");
        require(c.getConsumerOffsetManager().load(), "consumerOffset.json");
        System.out.println(c.getTopicConfigManager().encode(false));
        System.out.println(c.getSubscriptionGroupManager().encode(false));
        System.out.println(c.getConsumerOffsetManager().encode(false));
    }

    static void validate(String[] hexNames) {
        for (String hex : hexNames) {
            String name = new String(HexFormat.of().parseHex(hex), StandardCharsets.UTF_8);
            TopicValidator.ValidateResult topic = TopicValidator.validateTopic(name);
            TopicValidator.ValidateResult group = TopicValidator.validateGroup(name);
            System.out.println(JSON.toJSONString(
                Arrays.asList(topic.isValid(), topic.getRemark(), group.isValid(), group.getRemark())));
        }
    }

    static void require(boolean loaded, String what) {
        if (!loaded) {
            System.err.println("failed to load " + what);
            System.exit(1);
        }
    }
}
