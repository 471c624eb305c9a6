"""Request processors, a class per request family, as RocketMQ's broker/processor package: ``send``
(SendMessageProcessor), ``pull`` (PullMessageProcessor), ``client_manage`` (ClientManageProcessor: heartbeats,
unregistering, consumer lists), ``consumer_manage`` (ConsumerManageProcessor: consumer offsets), ``admin``
(AdminBrokerProcessor: queue offsets, broker info, cleanups), ``topic_admin`` and ``group_admin`` (the topic and
subscription group requests of Java's AdminBrokerProcessor), ``query_message`` (QueryMessageProcessor),
``send_back`` (CONSUMER_SEND_MSG_BACK), ``end_transaction``, ``auth_admin`` (ACL 2.0's users and ACLs, 3001-3010),
``acl_admin`` (ACL 1.0's legacy accounts requests, 50-53); ``common`` holds what they share, ``request_headers``
which custom header each request code carries (they parse through it).
Each gets the parts it uses from BrokerController, which builds them; ``registry`` lists which ones it registers."""
