"""rmq broker: RocketMQ-compatible store, remoting, NameServer and broker daemon."""
