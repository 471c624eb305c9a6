"""A request checked before its processor: authentication, then authorization (Apache's request pipeline order).

Each step raises AuthenticationError or AuthorizationError with Apache's message; the broker answers it
NO_PERMISSION with that message as the remark. Authentication (``DefaultAuthenticationHandler``): the request names
an enabled user whose password signed it. Authorization (``UserAuthorizationHandler`` then
``AclAuthorizationHandler``), once per context of ``actions.contexts``, in order: a SUPER user may do anything; a
NORMAL user needs a matching entry, and the best match (``_precedence``) must allow.

Examples:
    >>> evaluator = AuthEvaluator(config, metadata)  # doctest: +SKIP
    >>> evaluator.check(request, "127.0.0.1")  # doctest: +SKIP  (raises AuthError to refuse)
"""

from __future__ import annotations

from broker.auth.actions import AuthorizationContext, contexts
from broker.auth.config import AuthConfig
from broker.auth.metadata import AuthMetadataManager
from broker.auth.model import Decision, PolicyEntry, PolicyType, ResourcePattern, ResourceType, UserStatus, UserType
from broker.common.errors import AuthenticationError, AuthorizationError
from broker.remoting.command import RemotingCommand
from broker.remoting.signing import ACCESS_KEY, signature_matches

_PATTERN_RANK = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}


class AuthEvaluator:
    def __init__(self, config: AuthConfig, metadata: AuthMetadataManager) -> None:
        self.config = config
        self.metadata = metadata

    def check(self, request: RemotingCommand, source_ip: str) -> None:
        """Raise AuthError when ``request`` from ``source_ip`` is refused; return when it may go to its processor."""
        if self.config.authentication_enabled and str(request.code) not in self.config.authentication_whitelist:
            self.authenticate(request)
        if self.config.authorization_enabled:
            for context in contexts(request, source_ip, self.config.cluster_name):
                if str(context.code) not in self.config.authorization_whitelist:
                    self.authorize(context)

    def authenticate(self, request: RemotingCommand) -> None:
        username = request.ext_fields.get(ACCESS_KEY) if request.ext_fields else None
        if not username:
            raise AuthenticationError("username cannot be null.")
        user = self.metadata.store.get_user(username)
        if user is None:
            raise AuthenticationError(f"User:{username} is not found.")
        if user.user_status is UserStatus.DISABLE:
            raise AuthenticationError(f"User:{username} is disabled.")
        if not signature_matches(request, user.password or ""):
            raise AuthenticationError("check signature failed.")

    def authorize(self, context: AuthorizationContext) -> None:
        if context.username is None:  # Apache dereferences the null subject; its strategy words the failure so
            raise AuthorizationError("Authorization failed. Please verify your access rights and try again.")
        user = self.metadata.store.get_user(context.username)
        if user is None:
            raise AuthorizationError(f"User:{context.username} not found.")
        if user.user_status is UserStatus.DISABLE:
            raise AuthorizationError(f"User:{context.username} is disabled.")
        if user.user_type is UserType.SUPER:
            return
        entry = self._best_entry(context)
        if entry is None:
            raise _refusal(context, "no matched policies.")
        if entry.decision is Decision.DENY:
            raise _refusal(context, "the decision is deny.")

    def _best_entry(self, context: AuthorizationContext) -> PolicyEntry | None:
        """The CUSTOM policy's matching entries, or only if there are none the DEFAULT policy's; the first by
        precedence decides."""
        acl = self.metadata.store.get_acl(context.username or "")
        if acl is None:
            return None
        for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
            policy = acl.policy(policy_type)
            matched = [e for e in policy.entries if e.matches(context.resource, context.actions, context.source_ip)
                       ] if policy else []
            if matched:
                return min(matched, key=_precedence)  # min keeps the first of equals, as Java's stable sort does
        return None


def _precedence(entry: PolicyEntry) -> tuple[int, int, int, int]:
    """``comparePolicyEntries`` as a sort key: a typed resource before ``*``; then LITERAL, PREFIXED, ANY; of two
    prefixes the longer; then DENY before ALLOW.

    Java's comparator ranks PREFIXED over PREFIXED by length, patterns otherwise, and only compares patterns of
    resources of the same type, ``*`` aside; entries that can match one request all cover its one resource type, so
    ordering by this key gives the same first entry."""
    resource = entry.resource
    assert resource is not None  # an entry that matched has one
    is_any_type = 1 if resource.resource_type is ResourceType.ANY else 0
    prefix = -len(resource.name or "") if resource.pattern is ResourcePattern.PREFIXED else 0
    return (is_any_type, _PATTERN_RANK[resource.pattern], prefix, 0 if entry.decision is Decision.DENY else 1)


def _refusal(context: AuthorizationContext, detail: str) -> AuthorizationError:
    return AuthorizationError(f"User:{context.username} has no permission to access {context.resource.key} from "
                              f"{context.source_ip}, {detail}")
