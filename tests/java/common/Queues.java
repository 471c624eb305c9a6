/*
 * Queue choices both drivers make the same way (the 4.9 and 5.x client APIs agree here).
 */

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageQueue;

final class Queues {
    private Queues() {
    }

    /** With --queue Q only the queues with that id (on every broker), else all of them; sorted. */
    static List<MessageQueue> selected(Collection<MessageQueue> all, Args args) {
        List<MessageQueue> queues = new ArrayList<>();
        for (MessageQueue mq : all) {
            if (!args.has("queue") || mq.getQueueId() == args.getInt("queue", 0)) {
                queues.add(mq);
            }
        }
        queues.sort(null);
        return queues;
    }

    /** The producer's writable queue ``queueId`` of ``topic``. */
    static MessageQueue target(DefaultMQProducer producer, String topic, int queueId) throws Exception {
        for (MessageQueue mq : producer.fetchPublishMessageQueues(topic)) {
            if (mq.getQueueId() == queueId) {
                return mq;
            }
        }
        throw new IllegalArgumentException("topic " + topic + " has no writable queue " + queueId);
    }
}
