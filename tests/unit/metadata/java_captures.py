"""Metadata as Apache RocketMQ 5.5.1 writes it, captured with tests/java/metadata/MetadataOracle.java.

Provenance: ``MetadataOracle write <root> broker-a`` on rocketmq-broker/remoting/common/store 5.5.1 (fastjson2
2.0.63), default BrokerConfig apart from brokerName broker-a and brokerClusterName DefaultCluster. The Java-marked
tests (test_java_metadata.py) regenerate and check the same facts live; these copies let the unit tests run without
a JDK.
"""

from __future__ import annotations

# Captured from tests/java/metadata/MetadataOracle.java (`write`, rocketmq-broker 5.5.1, fastjson2 2.0.63):
# config/consumerOffset.json exactly as Apache's broker wrote it (no trailing newline).
JAVA_CONSUMER_OFFSET_JSON = (
    "{\n"
    '\t"dataVersion":{\n'
    '\t\t"counter":0,\n'
    '\t\t"stateVersion":0,\n'
    '\t\t"timestamp":1795647958504\n'
    "\t},\n"
    '\t"groupTopicMap":{\n'
    '\t\t"GID_custom":[\n'
    '\t\t\t"TopicTest"\n'
    "\t\t],\n"
    '\t\t"GID_test":[\n'
    '\t\t\t"TopicTest",\n'
    '\t\t\t"%RETRY%GID_test"\n'
    "\t\t]\n"
    "\t},\n"
    '\t"offsetTable":{\n'
    '\t\t"%RETRY%GID_test@GID_test":{\n'
    "\t\t\t0:2\n"
    "\t\t},\n"
    '\t\t"TopicTest@GID_custom":{\n'
    "\t\t\t1:12345678901\n"
    "\t\t},\n"
    '\t\t"TopicTest@GID_test":{\n'
    "\t\t\t0:250,\n"
    "\t\t\t3:7\n"
    "\t\t}\n"
    "\t}\n"
    "}"
)


# (topic, readQueueNums, writeQueueNums, perm) of Apache 5.5.1's TopicConfigManager.init for brokerName broker-a in
# DefaultCluster with default settings (captured with tests/java/metadata/MetadataOracle.java), minus
# rmq_sys_wheel_timer, which needs the timer store rmq does not have.
JAVA_SYSTEM_TOPICS = {
    ("SELF_TEST_TOPIC", 1, 1, 6),
    ("TBW102", 8, 8, 7),
    ("BenchmarkTest", 1024, 1024, 6),
    ("DefaultCluster", 16, 16, 7),
    ("broker-a", 1, 1, 7),
    ("OFFSET_MOVED_EVENT", 1, 1, 6),
    ("SCHEDULE_TOPIC_XXXX", 18, 18, 6),
    ("DefaultCluster_REPLY_TOPIC", 1, 1, 6),
    ("rmq_sys_REVIVE_LOG_DefaultCluster", 8, 8, 6),
    ("rmq_sys_SYNC_BROKER_MEMBER_broker-a", 1, 1, 1),
    ("RMQ_SYS_TRANS_HALF_TOPIC", 1, 1, 6),
    ("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 1, 6),
    ("RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC", 1, 1, 6),
    ("RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC", 1, 1, 6),
}


# One group as Apache 5.5.1 writes it in subscriptionGroup.json (captured with MetadataOracle `write`).
JAVA_CUSTOM_GROUP = {
    "attributes": {},
    "brokerId": 0,
    "consumeBroadcastEnable": False,
    "consumeEnable": True,
    "consumeFromMinEnable": True,
    "consumeMessageOrderly": True,
    "consumeTimeoutMinute": 15,
    "groupName": "GID_custom",
    "groupRetryPolicy": {
        "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 3},
        "type": "EXPONENTIAL",
    },
    "groupSysFlag": 0,
    "notifyConsumerIdsChangedEnable": True,
    "retryMaxTimes": 3,
    "retryQueueNums": 1,
    "whichBrokerWhenConsumeSlowly": 1,
}
