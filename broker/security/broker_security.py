"""What a process of the broker knows about security: each TLS listener's context, the SASL
mechanisms each listener offers, and the SCRAM credentials (in memory, kept fresh).

Credentials live in the coordination backend's store (coordination/credentials.py:
``/config/users/<user>`` in ZooKeeper, a file with the local backend). A connection's
lookup must not wait, so the store's watch only wakes a reader thread, which parses every
credential again and replaces the whole table in one assignment; the loop reads it.

Certificates reload on SIGHUP: ``reload_certificates`` builds each listener's context
again from the same files; connections already open keep the session they have. The
dynamic per-listener TLS configs (broker/listener_configs.py) lie over the file's settings
(``tls_settings``); each change notice rebuilds the contexts of the listeners they name.

ACLs (with ``authorizer.class.name`` set) are kept the same way: the ACL store's watch wakes
a reader thread that builds a new AclRules (coordination/acls/authorizer.py: Kafka's rules) and swaps it
in; ``authorize`` reads whichever is current. Without an authorizer everything is allowed,
as in Kafka.
"""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING, Callable, Mapping

from broker.config import BrokerConfig
from broker.security.broker_proof import PRINCIPAL_PREFIX
from broker.security.delegation_tokens import TokenCache, TokenLookup
from broker.security.scram_credentials import ScramCredential, from_kafka_string
from broker.security.tls import build_server_context
from coordination.acls.authorizer import AclRules
from coordination.acls.model import CLUSTER_NAME, Operation, ResourceType
from coordination.store_follower import StoreFollower

if TYPE_CHECKING:
    from broker.listener_configs import ListenerValues
    from broker.security.inter_broker import ClientSecurity
    from coordination.acls.store import AclStore
    from coordination.credentials import CredentialStore

log = logging.getLogger(__name__)


def check_tls_files(config: BrokerConfig) -> None:
    """Build every TLS listener's context once, before anything starts: a missing file or
    a wrong key password stops ``castle serve`` with the listener's name (ValueError)."""
    for listener in config.listeners.bound:
        if listener.tls:
            try:
                build_server_context(config.tls_settings(listener.name))
            except (OSError, ValueError, ssl.SSLError) as exc:
                raise ValueError(f"listener {listener.name}: {exc}") from None


def parse_credentials(raw: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, ScramCredential]]:
    table: dict[str, dict[str, ScramCredential]] = {}
    for user, entries in raw.items():
        for mechanism, text in entries.items():
            try:
                table.setdefault(user, {})[mechanism] = from_kafka_string(text)
            except ValueError as exc:
                log.warning("ignoring the %s credential of user %r: %s", mechanism, user, exc)
    return table


class BrokerSecurity:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.reauth_ms = config.get_int("connections.max.reauth.ms")
        self.broker_secret: bytes | None = None  # set by whoever opened the backend (set_broker_secret)
        # Principals that are brokers' own: CASTLE-BROKER's, and the inter-broker SASL user of this config.
        self._broker_principals: frozenset[str] = frozenset()
        self.max_receive_size = config.get_int("sasl.server.max.receive.size")
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._dynamic_tls: "ListenerValues" = {}  # listener (upper case) -> dynamic ssl.* values
        self._credentials: dict[str, dict[str, ScramCredential]] = {}
        self._followers: list[StoreFollower] = []  # the reader threads (_follow)
        self.authorizer_on = bool(config.get_str("authorizer.class.name"))
        self._super_users = config.get_str("super.users")
        self._everyone_if_no_acl = config.get_bool("allow.everyone.if.no.acl.found")
        self._rules = AclRules((), self._super_users, self._everyone_if_no_acl)
        # Delegation tokens (broker/security/delegation_tokens.py), when a secret key is set.
        self.tokens: TokenCache | None = None
        self._mechanisms = {listener.name: tuple(m for m in str(config.for_listener(listener.name, "sasl.enabled.mechanisms"))
                                                  .split(",") if m)
                            for listener in config.listeners.bound}
        self.reload_certificates()

    # ------------------------------------------------------------------ TLS
    def server_context(self, listener: str) -> ssl.SSLContext:
        return self._contexts[listener]

    def tls_listeners(self) -> set[str]:
        return {listener.name.upper() for listener in self.config.listeners.bound if listener.tls}

    def tls_settings(self, listener: str) -> dict[str, str]:
        """The TLS settings ``listener`` serves with: its dynamic values over the file's."""
        return {**self.config.tls_settings(listener), **self._dynamic_tls.get(listener.upper(), {})}

    def set_dynamic_tls(self, values: "ListenerValues") -> None:
        """Take this broker's dynamic per-listener TLS values (after every change notice, so
        setting the same keystore location again reloads its file, as in Kafka)."""
        named = set(values) | set(self._dynamic_tls)
        self._dynamic_tls = values
        if named:
            self.reload_certificates(only=named)

    def reload_certificates(self, only: set[str] | None = None) -> None:
        """(Re)build every TLS listener's context (or those in ``only``) from its files; a
        listener whose files no longer load keeps its old context (and says so)."""
        for listener in self.config.listeners.bound:
            if not listener.tls or (only is not None and listener.name.upper() not in only):
                continue
            try:
                self._contexts[listener.name] = build_server_context(self.tls_settings(listener.name))
            except (OSError, ValueError, ssl.SSLError) as exc:
                if listener.name not in self._contexts:
                    raise
                log.error("listener %s: cannot reload its certificates (%s); keeping the old ones", listener.name, exc)

    # ------------------------------------------------------------------ SASL
    def mechanisms(self, listener: str) -> tuple[str, ...]:
        return self._mechanisms.get(listener, ())

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        """In memory, for the event loop."""
        return self._credentials.get(user, {}).get(mechanism)

    @property
    def token_lookup(self) -> TokenLookup | None:
        """How SCRAM finds a delegation token; None while tokens are disabled."""
        return self.tokens.lookup if self.tokens is not None else None

    def watch_credentials(self, store: "CredentialStore") -> None:
        """Keep the table fresh from ``store`` (a reader thread; the first read happens here)."""
        def load() -> None:
            self._credentials = parse_credentials(store.all())

        load()
        self._follow("credentials", load, store.watch)

    def _follow(self, what: str, load: Callable[[], None], watch: Callable[[Callable[[], None]], object]) -> None:
        """A reader thread that runs ``load`` after each change ``watch`` reports."""
        follower = StoreFollower(load, what, what)
        self._followers.append(follower)
        follower.start(watch)

    # ------------------------------------------------------------------ brokers
    def set_broker_secret(self, secret: bytes, client: "ClientSecurity | None") -> None:
        """The cluster's secret, and how this broker connects to others: the SASL user it
        authenticates as is a broker's principal too."""
        self.broker_secret = secret
        user = client.username if client is not None and client.mechanism is not None else ""
        self._broker_principals = frozenset({f"User:{user}"} if user else ())

    def is_broker(self, principal: str, host: str) -> bool:
        """May this principal do what only brokers do (append to __consumer_offsets, fetch as a
        follower)? A proven CASTLE-BROKER, the configured inter-broker SASL user, or with an
        authorizer whoever it grants CLUSTER_ACTION (Kafka's rule)."""
        if principal.startswith(PRINCIPAL_PREFIX) or principal in self._broker_principals:
            return True
        return self.authorizer_on and self.authorize(principal, host, Operation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                                     CLUSTER_NAME)

    # ------------------------------------------------------------------ ACLs
    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        if not self.authorizer_on:
            return True
        return self._rules.authorize(principal, host, operation, resource_type, name)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Could ``principal`` do ``operation`` on some resource of the type (Kafka's authorizeByResourceType)."""
        if not self.authorizer_on:
            return True
        return self._rules.authorize_any(principal, host, operation, resource_type)

    def watch_acls(self, store: "AclStore") -> None:
        def load() -> None:
            self._rules = AclRules(store.all(), self._super_users, self._everyone_if_no_acl)

        load()
        self._follow("ACLs", load, store.watch)

    def close(self) -> None:
        if self.tokens is not None:
            self.tokens.close()
        for follower in self._followers:
            follower.close()
