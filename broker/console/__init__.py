"""``mqconsole``: a web console for a RocketMQ cluster, ours or Apache's (what people open rocketmq-dashboard for):
the cluster's brokers, topics, consumer groups and their lag, message lookups and a message's trace, and charts of
the last minutes. Everything goes through the public protocol, through the admin tools' own calls.

Modules: ``server`` (the HTTP server, the static page, the event loop the API runs on; ``start_console`` starts it
in this process), ``api`` (requests, errors, routes, the handlers' shared state), ``cluster_api``, ``topic_api``,
``group_api``, ``message_api`` (the JSON API by page), ``views`` (the JSON forms of messages and results),
``sampler`` (the charts' figures), ``startup`` (the ``mqconsole`` command), ``process`` (the console as a child
process, as ``broker.tools.local_cluster`` starts servers); ``static/`` is the page: HTML, CSS and JavaScript
modules served as they are, no build step; ``screenshots/`` the README's pictures (tests/console/screenshots.py).

May import: ``broker.common``, ``broker.remoting``, ``broker.client`` and ``broker.tools``; it starts servers only
when asked (``start_console``, ``start_console_process``).

Examples:
    >>> from broker.console import start_console
    >>> with start_console("127.0.0.1:9876", port=0) as console:  # doctest: +SKIP
    ...     print(console.url)
"""

from broker.console.process import start_console_process
from broker.console.server import ConsoleServer, start_console

__all__ = ["ConsoleServer", "start_console", "start_console_process"]
