"""Which quota holds a request, and how long its connection waits: Kafka's ClientQuotaManager.

A worker keeps the quotas of the coordination backend (coordination/client_quotas.py) in
memory, reloaded by a reader thread whenever the store's watch fires, so a change holds
within the store's notice time, without a restart.

Resolution (Kafka's DefaultQuotaCallback, per quota type), the first level with a value
for the key wins, and says which clients share the measure (the counted entity)::

    /config/users/<user>/clients/<client-id>       counted per (user, client id)
    /config/users/<user>/clients/<default>         per (user, client id)
    /config/users/<user>                           per user
    /config/users/<default>/clients/<client-id>    per (user, client id)
    /config/users/<default>/clients/<default>      per (user, client id)
    /config/users/<default>                        per user
    /config/clients/<client-id>                    per client id
    /config/clients/<default>                      per client id

The user is the connection's principal name ("ANONYMOUS" without authentication), as
Kafka's quota user is. Rates are measured across all workers (broker/quotas/
shared_counters.py). With no quota of a type configured anywhere, a request of that
type costs one attribute test.
"""

from __future__ import annotations

from broker.quotas.shared_counters import FETCH, PRODUCE, REQUEST, QuotaCounters
from coordination.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    Entity,
    Quotas,
    QuotaStore,
)
from coordination.store_follower import StoreFollower

MUTATION = 3  # controller_mutation_rate: resolved here, measured by broker/quotas/mutation_buckets.py
KEY_OF_METRIC = {PRODUCE: PRODUCER_BYTE_RATE, FETCH: CONSUMER_BYTE_RATE, REQUEST: REQUEST_PERCENTAGE,
                 MUTATION: CONTROLLER_MUTATION_RATE}

# A level: (user part, client part); each part is "name" (the request's own), "default",
# or "" (absent from the entity). Then which parts the counted entity keeps.
_LEVELS = (
    (("name", "name"), (True, True)),
    (("name", "default"), (True, True)),
    (("name", ""), (True, False)),
    (("default", "name"), (True, True)),
    (("default", "default"), (True, True)),
    (("default", ""), (True, False)),
    (("", "name"), (False, True)),
    (("", "default"), (False, True)),
)

Side = tuple[bool, "str | None"]  # (present in the entity, name; None: the default)
Resolved = tuple[float, str] | None  # (bound per second, counted entity key)


def _sides(entity: Entity) -> tuple[Side, Side]:
    names = dict(entity)
    return ((USER in names, names.get(USER)), (CLIENT_ID in names, names.get(CLIENT_ID)))


class QuotaTable:
    """One reading of the store, resolved on demand and remembered per (metric, user, client)."""

    def __init__(self, quotas: dict[Entity, Quotas]) -> None:
        self._by_sides: dict[tuple[Side, Side], Quotas] = {}
        configured: set[str] = set()
        for entity, values in quotas.items():
            if any(kind == IP for kind, _name in entity):
                continue  # connection_creation_rate: per ip, not a request quota
            self._by_sides[_sides(entity)] = values
            configured.update(values)
        self.produce = PRODUCER_BYTE_RATE in configured
        self.fetch = CONSUMER_BYTE_RATE in configured
        self.request = REQUEST_PERCENTAGE in configured
        self.mutation = CONTROLLER_MUTATION_RATE in configured
        self._cache: dict[tuple[int, str, str], Resolved] = {}

    def resolve(self, metric: int, user: str, client_id: str) -> Resolved:
        cached = self._cache.get((metric, user, client_id), False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        key = KEY_OF_METRIC[metric]
        found: Resolved = None
        for (user_part, client_part), (keep_user, keep_client) in _LEVELS:
            user_side: Side = (True, user) if user_part == "name" else (True, None) if user_part == "default" else (False, None)
            client_side: Side = ((True, client_id) if client_part == "name" else (True, None) if client_part == "default"
                                 else (False, None))
            values = self._by_sides.get((user_side, client_side))
            if values is not None and key in values:
                counted = f"{user if keep_user else ''}\x00{client_id if keep_client else ''}"
                found = (values[key], counted)
                break
        if len(self._cache) > 100_000:
            self._cache.clear()  # many short-lived client ids: keep memory bounded
        self._cache[(metric, user, client_id)] = found
        return found


class QuotaBook:
    """A worker's quotas and their measures. ``throttle_ms`` is called per request."""

    def __init__(self, counters: QuotaCounters) -> None:
        self.counters = counters
        self.table = QuotaTable({})
        self._follower: StoreFollower | None = None

    def follow(self, store: QuotaStore) -> None:
        """Load now, then again after each change of ``store`` (on a reader thread)."""
        def load() -> None:
            self.table = QuotaTable(store.all())

        load()
        self._follower = StoreFollower(load, "client-quotas", "client quotas")
        self._follower.start(store.watch)

    def throttle_ms(self, metric: int, principal: str, client_id: str | None, value: float) -> int:
        """Record ``value`` (bytes) for the request's quota, if it has one; Kafka's throttle time."""
        found = self.table.resolve(metric, principal.partition(":")[2] or principal, client_id or "")
        if found is None:
            return 0
        bound, counted = found
        return self.counters.throttle_ms(counted, metric, value, bound)

    def unrecord(self, metric: int, principal: str, client_id: str | None, value: float) -> None:
        """Take back what ``throttle_ms`` recorded (an answer that went without its records)."""
        found = self.table.resolve(metric, principal.partition(":")[2] or principal, client_id or "")
        if found is not None:
            self.counters.record(found[1], metric, -value)

    def most_in_window(self, metric: int, principal: str, client_id: str | None) -> int | None:
        """Kafka's getMaxValueInQuotaWindow: at most this much of one answer (a Fetch's
        max_bytes), so a single response cannot outgrow the quota's whole window."""
        found = self.table.resolve(metric, principal.partition(":")[2] or principal, client_id or "")
        if found is None:
            return None
        return int(found[0] * (self.counters.samples - 1) * self.counters.window_ms / 1000)

    def close(self) -> None:
        if self._follower is not None:
            self._follower.close()
