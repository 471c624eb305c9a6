"""Request processors, one module per request family, as RocketMQ's broker/processor package: ``send``
(SendMessageProcessor), ``pull`` (PullMessageProcessor), ``client_manage`` (heartbeats, unregistering, consumer
lists), ``consumer_manage`` (consumer offsets), ``admin`` (AdminBrokerProcessor), ``send_back``
(CONSUMER_SEND_MSG_BACK), ``end_transaction``; ``registry`` lists them for BrokerController."""
