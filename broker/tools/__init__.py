"""Admin tools: ``mqadmin`` (RocketMQ's admin command line) and the async MQAdminExt API it is built on.

Modules: ``admin`` (MQAdminExt: the admin calls; offsets and messages), ``admin_client`` (its transport and the calls
about the cluster), ``admin_config`` (the calls about broker and NameServer config, KV, write permission and stats),
``results`` (what the admin calls answer beside the wire bodies, which are ``broker.remoting``'s), ``topic_commands``,
``commands``, ``messages``, ``ha_commands``, ``broker_commands``, ``namesrv_commands``, ``message_commands``,
``stats_commands``, ``auth_commands`` (ACL 2.0) and ``acl_v1_commands`` (ACL 1.0) (what each command does and
prints, by concept; the later ones declare their commands too; ``auth_commands`` also reads the keys of
``conf/tools.yml`` every command signs with),
``cli`` (what the commands share: options, parsed options, Java's text forms) and ``mqadmin`` (the command line:
the command table, help, exit codes), ``local_cluster`` (a NameServer and brokers as local processes on free ports,
for the demo job and the tests).

May import: ``broker.common``, ``broker.remoting`` and ``broker.client``; it starts servers only as processes.

Examples:
    >>> from broker.tools import MQAdminExt
    >>> async with MQAdminExt("127.0.0.1:9876") as admin:  # doctest: +SKIP
    ...     print(await admin.fetch_all_topic_list())
"""

from broker.tools.admin import MQAdminExt

__all__ = ["MQAdminExt"]
