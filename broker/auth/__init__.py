"""ACL 2.0 (Apache's ``rocketmq-auth``) and ACL 1.0 (legacy ``rocketmq-acl``): who sent a request, and whether it
may do what it asks.

``model`` (users, ACLs, policies, resources, actions; their stored and admin-body JSON), ``actions`` (the one table
from request code to the resources and actions a request needs), ``evaluate`` (authentication, then authorization),
``metadata`` (user and ACL changes, checked as Apache checks them), ``store`` (the users and ACLs tables under the
broker's ``config`` directory), ``config`` (AuthConfig, the broker.conf keys). The signature itself is
``broker.remoting.signing``'s, shared with the clients.

ACL 1.0 (``aclEnable``, ``plain_acl.yml``, Apache up to 5.3.2): ``plain`` (the accounts, the check in Apache's order,
the reload, the admin changes), ``plain_config`` (the yml), ``plain_address`` (white-list patterns),
``plain_resources`` (permissions and the one table from request code to the topics and groups it needs).

May import: ``broker.common`` and ``broker.remoting``; only ``broker.server`` imports it. No sockets, no event loop:
the broker calls it on each request. This face re-exports nothing.
"""
