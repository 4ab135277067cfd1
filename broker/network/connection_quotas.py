"""Kafka's ConnectionQuotas: whether a worker takes a new connection, delays it, or refuses it.

The limits, Kafka's names, each a dynamic broker config (broker/dynamic_configs.py) or a file
setting:

    max.connections                   open connections of the broker; per listener with the prefix
                                      listener.name.<listener>. (the broker's value when unset there)
    max.connections.per.ip            open connections from one address
    max.connections.per.ip.overrides  "host:n,ip:n": other maxima for some addresses
    max.connection.creation.rate      new connections per second of the broker; per listener likewise

and the ips client quota ``connection_creation_rate`` (/config/ips/<ip>, /config/ips/<default>:
coordination/client_quotas.py), followed here from the store.

The order is Kafka's (ConnectionQuotas.inc), which each listener's acceptor
(broker/network/acceptor.py) follows for every connection it accepts:

1. ``creation_delay_ms``: the connection counts in the broker's and its listener's creation
   rates; over either, the acceptor takes nothing more on that listener for the throttle time
   (at most one quota window, Kafka's bound). The inter-broker listener is measured against
   its listener's rate only.
2. ``admit``: a slot must be free: the listener below its max.connections and the broker below
   its own; the inter-broker listener is exempt from the broker's bound when there are other
   listeners (Kafka protects it). No slot: WAIT, the acceptor holds the connection and stops
   accepting on that listener until one frees.
3. the address's creation rate, when it has a quota: over it, the connection is taken back out
   of the rates and THROTTLED: closed unanswered once its throttle time passed, as Kafka's
   acceptor does.
4. the address's open connections: already at its maximum, the connection is REFUSED (closed
   at once); else it is counted and ADMITTED.

And ``close_excess`` (each worker's housekeeping, every half second): over max.connections
(lowered at run time, or filled by the protected listener), each worker closes its least
recently active connections of the other listeners, as each of Kafka's processors does.

Counts and rates are the broker's, shared by its workers (broker/quotas/connection_counts.py).
Steps 2 to 4 run under the broker's admission lock when a count limit or an address quota is
set, so a limit holds exactly across workers; with none, a connection costs a few additions at
accept and at close, and nothing per request.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from broker.config import LISTENER_PREFIX, BrokerConfig
from broker.listeners import Listener
from broker.quotas.connection_counts import CREATED, MAX_LISTENERS, AdmissionLock, ConnectionCounts, address_hash
from broker.quotas.shared_counters import QuotaCounters
from coordination.client_quotas import CONNECTION_CREATION_RATE, IP, QuotaStore
from coordination.store_follower import StoreFollower

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1  # Kafka's Integer.MAX_VALUE: the default of every limit, meaning none

# admit()'s answers; a positive answer is THROTTLED: close after that many milliseconds.
ADMITTED, WAIT, REFUSED = 0, -1, -2

BROKER_RATE = "broker"


class Served(Protocol):
    """What close_excess needs of a served connection (broker/network/connection.py)."""

    listener: Listener
    peer: str
    closed: bool

    @property
    def last_active(self) -> float: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Limits:
    total: int = UNLIMITED
    per_ip: int = UNLIMITED
    rate: int = UNLIMITED
    listener_total: tuple[int, ...] = ()
    listener_rate: tuple[int, ...] = ()

    @property
    def counted(self) -> bool:
        """Some count limit is set (admission then takes the lock)."""
        return self.total < UNLIMITED or self.per_ip < UNLIMITED or any(n < UNLIMITED for n in self.listener_total)


def limits_of(config: BrokerConfig, listeners: Sequence[str], dynamic: Mapping[str, Any] | None = None) -> Limits:
    """The limits ``config`` sets, the per-listener ones in the order of ``listeners`` (names).
    A listener's own value wins over the broker's, as Kafka's listener prefix does: one set at
    run time (``dynamic``, ``listener.name.<listener>.<setting>`` names), else the file's."""
    dynamic = dynamic or {}

    def per_listener(name: str, setting: str) -> int:
        value = dynamic.get(f"{LISTENER_PREFIX}{name.lower()}.{setting}")
        return int(value if value is not None else config.for_listener(name, setting))

    return Limits(config.get_int("max.connections"), config.get_int("max.connections.per.ip"),
                  config.get_int("max.connection.creation.rate"),
                  tuple(per_listener(name, "max.connections") for name in listeners),
                  tuple(per_listener(name, "max.connection.creation.rate") for name in listeners))


def normal_address(text: str) -> str:
    """An address as accept() reports it for IPv4 and IPv6 alike (an IPv4-mapped IPv6 address is
    its IPv4 one, as Java's InetAddress makes it); a host name is left as it is."""
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return text.strip()
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def accepted_address(text: str) -> str:
    """normal_address for what accept() gave, cheaply: only a mapped IPv4 address needs it."""
    return text[7:] if text.startswith("::ffff:") and "." in text else text


def parse_overrides(text: str) -> dict[str, int]:
    """``host:n,ip:n`` -> {host or address: n} (the setting's parser checked the form)."""
    out: dict[str, int] = {}
    for item in text.split(","):
        if item.strip():
            host, _, count = item.strip().rpartition(":")
            out[normal_address(host)] = int(count)
    return out


def _resolved(host: str) -> str | None:
    try:
        return normal_address(str(socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0]))
    except (OSError, IndexError) as exc:
        log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s; its override is not applied", host, exc)
        return None


class ConnectionQuotas:
    """One worker's view of its broker's connection limits, and its side of the shared counts."""

    def __init__(self, counts: ConnectionCounts, rates: QuotaCounters, lock: AdmissionLock,
                 listeners: Sequence[Listener], inter_broker: str) -> None:
        self.counts = counts
        self.rates = rates
        self._lock = lock
        self.listener_names = [listener.name for listener in listeners]
        if len(self.listener_names) > MAX_LISTENERS:
            raise ValueError(f"at most {MAX_LISTENERS} listeners are counted, not {len(self.listener_names)}")
        # Kafka protects the inter-broker listener from the broker-wide bound only when there
        # are other listeners for that bound to hold.
        self._protected = self.listener_names.index(inter_broker) \
            if inter_broker in self.listener_names and len(self.listener_names) > 1 else -1
        self._max_throttle_ms = rates.window_ms  # Kafka's bound: one quota window
        self.limits = Limits(listener_total=(UNLIMITED,) * len(listeners),
                             listener_rate=(UNLIMITED,) * len(listeners))
        self._overrides: Mapping[str, int] = {}
        self._overrides_text = ""
        self._ip_rates: Mapping[str | None, int] = {}  # address (None: the default) -> connections per second
        self._follower: StoreFollower | None = None
        self.slot_freed: list[Callable[[], None]] = []  # acceptors waiting for a slot

    # ------------------------------------------------------------------ settings
    def configure(self, config: BrokerConfig, per_listener: Mapping[str, Any] | None = None) -> None:
        """Take the connection limits ``config`` has now, and the per-listener ones set at run time
        (at start, and after each dynamic change)."""
        limits = limits_of(config, self.listener_names, per_listener)
        if limits != self.limits:
            log.info("connection limits: max.connections=%d max.connections.per.ip=%d max.connection.creation.rate=%d; "
                     "per listener %s", limits.total, limits.per_ip, limits.rate,
                     ", ".join(f"{name} max.connections={total} max.connection.creation.rate={rate}" for name, total, rate
                               in zip(self.listener_names, limits.listener_total, limits.listener_rate)))
        self.limits = limits
        text = config.get_str("max.connections.per.ip.overrides")
        if text != self._overrides_text:
            self._overrides_text = text
            overrides = parse_overrides(text)
            names = {host: count for host, count in overrides.items() if not _is_address(host)}
            self._overrides = {host: count for host, count in overrides.items() if host not in names}
            if names:
                # Kafka resolves host names when it takes the setting; here off the event loop.
                threading.Thread(target=self._resolve, args=(text, names), name="castle-overrides", daemon=True).start()
        for waiting in list(self.slot_freed):
            waiting()  # a raised limit may free a slot

    def _resolve(self, text: str, names: Mapping[str, int]) -> None:
        resolved = dict(self._overrides)
        for host, count in names.items():
            address = _resolved(host)
            if address is not None:
                resolved[address] = count
        if self._overrides_text == text:
            self._overrides = resolved

    def follow_ip_quotas(self, store: QuotaStore) -> None:
        """The ips quotas' connection_creation_rate, loaded now and again after each change."""
        def reload() -> None:
            rates: dict[str | None, int] = {}
            for entity, quotas in store.all().items():
                names = dict(entity)
                if IP in names and CONNECTION_CREATION_RATE in quotas:
                    ip = names[IP]
                    rates[None if ip is None else normal_address(ip)] = int(quotas[CONNECTION_CREATION_RATE])
            self._ip_rates = {ip: rate for ip, rate in rates.items() if rate < UNLIMITED}

        reload()
        self._follower = StoreFollower(reload, "castle-ip-quotas", "ip connection quotas")
        self._follower.start(store.watch)

    def ip_rate(self, address: str) -> int:
        """Kafka's connectionRateForIp: the address's own quota, else the default's, else none."""
        rates = self._ip_rates
        rate = rates.get(address)
        return rate if rate is not None else rates.get(None, UNLIMITED)

    def max_for(self, address: str) -> int:
        return self._overrides.get(address, self.limits.per_ip)

    # ------------------------------------------------------------------ the accept path
    def creation_delay_ms(self, listener: int, now_ms: int | None = None) -> int:
        """Count a new connection in the broker's and the listener's creation rates; how long
        the listener's acceptor waits before it goes on (0: not at all)."""
        limits = self.limits
        broker_bound, listener_bound = limits.rate, limits.listener_rate[listener]
        if broker_bound >= UNLIMITED and listener_bound >= UNLIMITED:
            return 0
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        throttle = 0
        if broker_bound < UNLIMITED and listener != self._protected:
            throttle = self.rates.throttle_ms(BROKER_RATE, CREATED, 1.0, broker_bound, now_ms)
        if listener_bound < UNLIMITED:
            throttle = max(throttle, self.rates.throttle_ms(self._listener_key(listener), CREATED, 1.0,
                                                            listener_bound, now_ms))
        return min(throttle, self._max_throttle_ms)

    def admit(self, listener: int, address: str, now_ms: int | None = None) -> int:
        """ADMITTED (counted: call ``closed`` when it closes), WAIT (no slot now: ask again),
        REFUSED (close it now) or a throttle time in ms (close it then)."""
        hashed = address_hash(address)
        limits = self.limits
        if not limits.counted and not self._ip_rates:
            self.counts.opened(listener, hashed)
            return ADMITTED
        with self._lock:
            if not self._slot_free(listener, limits):
                return WAIT
            rate = self.ip_rate(address)
            if rate < UNLIMITED:
                now_ms = int(time.time() * 1000) if now_ms is None else now_ms
                key = "ip\x00" + address
                throttle = self.rates.throttle_ms(key, CREATED, 1.0, rate, now_ms)
                if throttle > 0:
                    # Not taken: it counts in none of the rates (Kafka un-records it).
                    self.rates.record(key, CREATED, -1.0, now_ms)
                    self._unrecord(listener, limits, now_ms)
                    return min(throttle, self._max_throttle_ms)
            if self.counts.address(hashed) >= self.max_for(address):
                return REFUSED
            self.counts.opened(listener, hashed)
            return ADMITTED

    def closed(self, listener: int, address: str) -> None:
        """An admitted connection closed: its slot is free for this broker's acceptors."""
        self.counts.closed(listener, address_hash(address))
        for waiting in list(self.slot_freed):
            waiting()

    def close_excess(self, connections: Iterable[Served]) -> int:
        """Kafka's closeExcessConnections: over max.connections (lowered at run time, or taken by
        the protected inter-broker listener), this worker's least recently active connections
        of the other listeners close until the broker is within it. Under the admission lock,
        and a close counts at once, so the workers together close no more than the excess."""
        limits = self.limits
        if limits.total >= UNLIMITED or self.counts.total() <= limits.total:
            return 0
        protected = self.listener_names[self._protected] if self._protected >= 0 else None
        with self._lock:
            excess = self.counts.total() - limits.total
            if excess <= 0:
                return 0
            victims = sorted((c for c in connections if not c.closed and c.listener.name != protected),
                             key=lambda c: c.last_active)[:excess]
            for connection in victims:
                log.info("closing %s on %s: the broker has more than max.connections=%d", connection.peer,
                         connection.listener.name, limits.total)
                connection.close()
        return len(victims)

    def slot_free(self, listener: int) -> bool:
        return self._slot_free(listener, self.limits)

    def _slot_free(self, listener: int, limits: Limits) -> bool:
        bound = limits.listener_total[listener]
        if bound < UNLIMITED and self.counts.listener(listener) >= bound:
            return False
        if listener == self._protected:
            return True
        return limits.total >= UNLIMITED or self.counts.total() < limits.total

    def _unrecord(self, listener: int, limits: Limits, now_ms: int) -> None:
        if limits.rate < UNLIMITED and listener != self._protected:
            self.rates.record(BROKER_RATE, CREATED, -1.0, now_ms)
        if limits.listener_rate[listener] < UNLIMITED:
            self.rates.record(self._listener_key(listener), CREATED, -1.0, now_ms)

    def _listener_key(self, listener: int) -> str:
        return "listener\x00" + self.listener_names[listener]

    def close(self) -> None:
        if self._follower is not None:
            self._follower.close()
        self._lock.close()


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False

