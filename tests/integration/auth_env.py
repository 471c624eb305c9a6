"""The broker.conf keys of an ACL 2.0 cluster (Apache's own, as the spec's live run used them), shared by the
integration and interop tests so that they share one running cluster of each kind (``clusters.shared``)."""

from __future__ import annotations

from broker.auth.config import (
    DEFAULT_AUTHENTICATION_PROVIDER,
    DEFAULT_AUTHORIZATION_PROVIDER,
    LOCAL_AUTHENTICATION_METADATA_PROVIDER,
    LOCAL_AUTHORIZATION_METADATA_PROVIDER,
)
from broker.remoting.signing import SessionCredentials

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
