"""AuthConfig: ACL 2.0's keys of broker.conf (Apache's ``AuthConfig``, which BrokerStartup fills from the same file).

Parsed once here, at the edge: the JSON of ``initAuthenticationUser`` and ``innerClientAuthenticationCredentials``
becomes typed values, the white lists sets of request codes. rmq has one implementation of each provider and
strategy, so a provider key may name Apache's class (or, for the two non-metadata providers, be blank, Apache's
default); another class is refused. A blank metadata provider with authentication or authorization on is refused too:
Apache's broker starts but then refuses every request (``The authenticationMetadataProvider is not configured``).

Examples:
    >>> config = parse_auth_config({"authenticationEnabled": "true",
    ...     "authenticationMetadataProvider": LOCAL_AUTHENTICATION_METADATA_PROVIDER,
    ...     "initAuthenticationUser": '{"username":"rocketmq","password":"12345678"}'}, "DefaultCluster")
    >>> config.authentication_enabled, config.init_authentication_user.username
    (True, 'rocketmq')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from broker.common.errors import ConfigError
from broker.remoting.signing import SessionCredentials

_PACKAGE = "org.apache.rocketmq.auth."
DEFAULT_AUTHENTICATION_PROVIDER = _PACKAGE + "authentication.provider.DefaultAuthenticationProvider"
LOCAL_AUTHENTICATION_METADATA_PROVIDER = _PACKAGE + "authentication.provider.LocalAuthenticationMetadataProvider"
DEFAULT_AUTHORIZATION_PROVIDER = _PACKAGE + "authorization.provider.DefaultAuthorizationProvider"
LOCAL_AUTHORIZATION_METADATA_PROVIDER = _PACKAGE + "authorization.provider.LocalAuthorizationMetadataProvider"
AUTHENTICATION_STRATEGIES = (_PACKAGE + "authentication.strategy.StatelessAuthenticationStrategy",
                             _PACKAGE + "authentication.strategy.StatefulAuthenticationStrategy")
AUTHORIZATION_STRATEGIES = (_PACKAGE + "authorization.strategy.StatelessAuthorizationStrategy",
                            _PACKAGE + "authorization.strategy.StatefulAuthorizationStrategy")

# key -> the values rmq accepts ("" is blank); the first is what ``to_properties`` prints
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "authenticationProvider": (DEFAULT_AUTHENTICATION_PROVIDER, ""),
    "authenticationMetadataProvider": (LOCAL_AUTHENTICATION_METADATA_PROVIDER, ""),
    "authenticationStrategy": (*AUTHENTICATION_STRATEGIES, ""),
    "authorizationProvider": (DEFAULT_AUTHORIZATION_PROVIDER, ""),
    "authorizationMetadataProvider": (LOCAL_AUTHORIZATION_METADATA_PROVIDER, ""),
    "authorizationStrategy": (*AUTHORIZATION_STRATEGIES, ""),
}
SWITCH_KEYS = ("authenticationEnabled", "authorizationEnabled")
VALUE_KEYS = ("initAuthenticationUser", "innerClientAuthenticationCredentials", "authenticationWhitelist",
              "authorizationWhitelist")
# Apache's cache sizes and lifetimes: rmq has no cache in front of its tables, so these change nothing
CACHE_KEYS = ("userCacheMaxNum", "userCacheExpiredSecond", "userCacheRefreshSecond", "aclCacheMaxNum",
              "aclCacheExpiredSecond", "aclCacheRefreshSecond", "statefulAuthenticationCacheMaxNum",
              "statefulAuthenticationCacheExpiredSecond", "statefulAuthorizationCacheMaxNum",
              "statefulAuthorizationCacheExpiredSecond")
AUTH_KEYS = frozenset((*PROVIDER_KEYS, *SWITCH_KEYS, *VALUE_KEYS, *CACHE_KEYS))


@dataclass(frozen=True, slots=True)
class InitUser:
    """``initAuthenticationUser``: a SUPER user created at start when absent."""

    username: str
    password: str


@dataclass(frozen=True, slots=True)
class AuthConfig:
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    init_authentication_user: InitUser | None = None
    # a SUPER user created at start, and what the broker signs its own requests (NameServers, its master) with
    inner_client_credentials: SessionCredentials | None = None
    authentication_whitelist: frozenset[str] = frozenset()  # request codes, as text (Apache compares strings)
    authorization_whitelist: frozenset[str] = frozenset()
    cluster_name: str = "DefaultCluster"  # BrokerStartup sets clusterName: CLUSTER resources name it
    raw: tuple[tuple[str, str], ...] = ()  # the keys as read, for ``mqbroker -p``

    @property
    def enabled(self) -> bool:
        return self.authentication_enabled or self.authorization_enabled

    @property
    def metadata_configured(self) -> bool:
        """Users and ACLs are kept (Apache: a metadata provider is named); without, the admin requests fail."""
        return bool(dict(self.raw).get("authenticationMetadataProvider", "").strip())

    def to_properties(self) -> dict[str, str]:
        shown = {"authenticationEnabled": _bool_text(self.authentication_enabled),
                 "authorizationEnabled": _bool_text(self.authorization_enabled)}
        return {**shown, **dict(self.raw)}


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def _switch(props: Mapping[str, str], key: str) -> bool:
    raw = props.get(key, "false").strip().lower()
    if raw not in ("true", "false"):
        raise ConfigError(f"bad value for {key}: {props[key]!r} (expected true or false)")
    return raw == "true"


def _json_object(props: Mapping[str, str], key: str, names: tuple[str, str]) -> tuple[str, str] | None:
    raw = props.get(key, "").strip()
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"bad value for {key}: {raw!r} is not JSON ({err})") from err
    values = tuple(data.get(n) if isinstance(data, dict) else None for n in names)
    if not all(isinstance(v, str) and v.strip() for v in values):
        raise ConfigError(f"bad value for {key}: {raw!r} (expected {{\"{names[0]}\":...,\"{names[1]}\":...}}"
                          " with both set)")
    return values[0], values[1]


def _codes(props: Mapping[str, str], key: str) -> frozenset[str]:
    codes = frozenset(c.strip() for c in props.get(key, "").split(",") if c.strip())
    bad = sorted(c for c in codes if not c.lstrip("-").isdigit())
    if bad:
        raise ConfigError(f"bad value for {key}: {bad} (expected a comma list of request codes)")
    return codes


def _check_providers(props: Mapping[str, str], authentication: bool, authorization: bool) -> None:
    for key, accepted in PROVIDER_KEYS.items():
        value = props.get(key, "").strip()
        if value not in accepted:
            raise ConfigError(f"{key}={value} is refused: rmq has only {accepted[0]}")
    for key, on in (("authenticationMetadataProvider", authentication or authorization),
                    ("authorizationMetadataProvider", authorization)):
        if on and not props.get(key, "").strip():
            raise ConfigError(f"{key} is blank: set it to {PROVIDER_KEYS[key][0]} (with it blank Apache's broker "
                              "refuses every request)")


def parse_auth_config(props: Mapping[str, str], cluster_name: str) -> AuthConfig:
    """The ACL 2.0 keys of ``props`` (others are ignored here); ConfigError names a bad key."""
    authentication, authorization = (_switch(props, key) for key in SWITCH_KEYS)
    _check_providers(props, authentication, authorization)
    init_user = _json_object(props, "initAuthenticationUser", ("username", "password"))
    inner = _json_object(props, "innerClientAuthenticationCredentials", ("accessKey", "secretKey"))
    for key in CACHE_KEYS:
        if key in props and not props[key].strip().isdigit():
            raise ConfigError(f"bad value for {key}: {props[key]!r} (expected a number)")
    return AuthConfig(
        authentication_enabled=authentication, authorization_enabled=authorization,
        init_authentication_user=InitUser(*init_user) if init_user else None,
        inner_client_credentials=SessionCredentials(*inner) if inner else None,
        authentication_whitelist=_codes(props, "authenticationWhitelist"),
        authorization_whitelist=_codes(props, "authorizationWhitelist"), cluster_name=cluster_name,
        raw=tuple((k, v) for k, v in props.items() if k in AUTH_KEYS and k not in SWITCH_KEYS))
