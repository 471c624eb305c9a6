"""The broker.conf keys of an ACL 2.0 cluster (Apache's own, as the spec's live run used them), and the
``plain_acl.yml`` of an ACL 1.0 one, shared by the integration and interop tests so that they share one running
cluster of each kind (``clusters.shared``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.auth.config import (
    DEFAULT_AUTHENTICATION_PROVIDER,
    DEFAULT_AUTHORIZATION_PROVIDER,
    LOCAL_AUTHENTICATION_METADATA_PROVIDER,
    LOCAL_AUTHORIZATION_METADATA_PROVIDER,
)
from broker.remoting.signing import SessionCredentials

if TYPE_CHECKING:
    from tests.apache import ApacheCluster
    from tests.integration.cluster import Cluster, ClusterPool

SUPER = SessionCredentials("rocketmq", "12345678")
AUTH_CONF = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "authenticationProvider": DEFAULT_AUTHENTICATION_PROVIDER,
    "authenticationMetadataProvider": LOCAL_AUTHENTICATION_METADATA_PROVIDER,
    "authorizationProvider": DEFAULT_AUTHORIZATION_PROVIDER,
    "authorizationMetadataProvider": LOCAL_AUTHORIZATION_METADATA_PROVIDER,
    "initAuthenticationUser": '{"username":"rocketmq","password":"12345678"}',
    "innerClientAuthenticationCredentials": '{"accessKey":"rocketmq","secretKey":"12345678"}',
}

# ACL 1.0: removed from Apache in 5.3.3, so Apache's side of a comparison is the 5.3.2 broker (registered with the
# 5.5.0 NameServer). interWhite's own white address lets its requests from 127.0.0.2 skip the signature check.
PLAIN_ACL_VERSION = "5.3.2"
PLAIN_ACL = """\
accounts:
  - accessKey: interUser
    secretKey: interSecret1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [InterTopicA=PUB|SUB, InterTopicD=DENY]
    groupPerms: [InterGroupX=DENY]
  - accessKey: interAdmin
    secretKey: interAdmin1
    admin: true
  - accessKey: interWhite
    secretKey: interWhite1
    whiteRemoteAddress: 127.0.0.2
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
"""
PLAIN_USER = SessionCredentials("interUser", "interSecret1")
PLAIN_ADMIN = SessionCredentials("interAdmin", "interAdmin1")
PLAIN_WHITE = SessionCredentials("interWhite", "interWhite1")


def plain_acl_cluster(clusters: ClusterPool, kind: str) -> Cluster | ApacheCluster:
    """The session's ACL 1.0 cluster of ``kind`` (``rmq``, or ``apache``: the 5.3.2 broker), ``PLAIN_ACL`` in its
    ``conf/plain_acl.yml``."""
    return clusters.shared(kind, version=PLAIN_ACL_VERSION if kind == "apache" else None,
                           home_files={"conf/plain_acl.yml": PLAIN_ACL}, aclEnable="true")
