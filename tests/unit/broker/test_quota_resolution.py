"""broker/quotas/book.py: Kafka's precedence of quota entities and which clients share a measure."""

from __future__ import annotations

from broker.quotas.book import QuotaTable
from broker.quotas.shared_counters import FETCH, PRODUCE, REQUEST
from coordination.client_quotas import entity

LEVELS = [
    (entity([("user", "u"), ("client-id", "c")]), 1.0),
    (entity([("user", "u"), ("client-id", None)]), 2.0),
    (entity([("user", "u")]), 3.0),
    (entity([("user", None), ("client-id", "c")]), 4.0),
    (entity([("user", None), ("client-id", None)]), 5.0),
    (entity([("user", None)]), 6.0),
    (entity([("client-id", "c")]), 7.0),
    (entity([("client-id", None)]), 8.0),
]
COUNTED = ["u\x00c", "u\x00c", "u\x00", "u\x00c", "u\x00c", "u\x00", "\x00c", "\x00c"]


def test_each_level_wins_over_those_below_it() -> None:
    for top in range(len(LEVELS)):
        table = QuotaTable({key: {"producer_byte_rate": value} for key, value in LEVELS[top:]})
        assert table.resolve(PRODUCE, "u", "c") == (LEVELS[top][1], COUNTED[top]), top


def test_quota_types_resolve_apart_and_unset_types_cost_nothing() -> None:
    table = QuotaTable({entity([("user", "u")]): {"producer_byte_rate": 10.0},
                        entity([("client-id", None)]): {"consumer_byte_rate": 20.0},
                        entity([("ip", None)]): {"connection_creation_rate": 5.0}})
    assert table.produce and table.fetch and not table.request
    assert table.resolve(PRODUCE, "u", "c") == (10.0, "u\x00")
    assert table.resolve(FETCH, "u", "c") == (20.0, "\x00c")  # the default client id: per client id
    assert table.resolve(PRODUCE, "someone-else", "c") is None
    assert table.resolve(REQUEST, "u", "c") is None
    assert not QuotaTable({}).produce


def test_a_user_default_gives_each_user_a_measure_of_its_own() -> None:
    table = QuotaTable({entity([("user", None)]): {"producer_byte_rate": 10.0}})
    assert table.resolve(PRODUCE, "alice", "x") == (10.0, "alice\x00")
    assert table.resolve(PRODUCE, "bob", "x") == (10.0, "bob\x00")
