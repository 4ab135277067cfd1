"""Client-metrics subscriptions: Kafka's validation and matching, and the store they live in
(a real file, read by a second reader as another worker would)."""

from __future__ import annotations

import time

import pytest

from broker.telemetry.subscriptions import DEFAULT_INTERVAL_MS, InvalidSubscription, Subscriptions, validate
from coordination.client_metrics_store import local_client_metrics


def test_a_full_subscription_parses() -> None:
    sub = validate("producers", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.",
                                 "interval.ms": "1000", "match": "client_id=app-.*,client_software_name=apache-kafka-java"})
    assert sub.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.")
    assert sub.interval_ms == 1000
    assert sub.matches({"client_id": "app-7", "client_software_name": "apache-kafka-java"})
    assert not sub.matches({"client_id": "other", "client_software_name": "apache-kafka-java"})
    # A pattern must match the whole value, and an attribute the client did not send never matches.
    assert not sub.matches({"client_id": "xapp-7", "client_software_name": "apache-kafka-java"})
    assert not sub.matches({"client_id": "app-7", "client_software_name": None})


def test_defaults_and_no_pattern_matches_everyone() -> None:
    sub = validate("all", {"metrics": "*"})
    assert sub.interval_ms == DEFAULT_INTERVAL_MS
    assert sub.matches({})


@pytest.mark.parametrize("name,config,invalid_request,message", [
    ("", {"metrics": "*"}, True, "Subscription name can't be empty"),
    ("s", {"metric": "*"}, True, "Unknown client metrics configuration: metric"),
    ("s", {"interval.ms": "-5"}, True, "Invalid value -5 for interval.ms, interval must be between 100 and 3600000"),
    ("s", {"interval.ms": "99"}, True, "interval must be between 100 and 3600000"),
    ("s", {"interval.ms": "3600001"}, True, "interval must be between 100 and 3600000"),
    ("s", {"interval.ms": "often"}, False, "Invalid value often for configuration interval.ms"),
    ("s", {"match": "client_id=(unclosed"}, False, "Illegal client matching pattern: client_id=(unclosed"),
    ("s", {"match": "client_colour=red"}, False, "Illegal client matching pattern: client_colour=red"),
    ("s", {"match": "client_id"}, False, "Illegal client matching pattern: client_id"),
    ("s", {"match": "client_id=a=b"}, False, "Illegal client matching pattern: client_id=a=b"),
])
def test_bad_subscriptions_get_kafkas_errors(name: str, config: dict[str, str], invalid_request: bool,
                                             message: str) -> None:
    with pytest.raises(InvalidSubscription) as caught:
        validate(name, config)
    assert caught.value.invalid_request is invalid_request
    assert message in str(caught.value)


def test_a_change_reaches_another_reader_and_bumps_its_version(tmp_path: object) -> None:
    writer_store, reader_store = local_client_metrics(str(tmp_path)), local_client_metrics(str(tmp_path))
    writer, reader = Subscriptions(writer_store), Subscriptions(reader_store)
    writer.start()
    reader.start()
    try:
        before = reader.version
        writer.update("producers", lambda _current: {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"})
        assert writer.table["producers"].interval_ms == 500  # the writer reads its own write at once
        deadline = time.monotonic() + 5
        while "producers" not in reader.table and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reader.table["producers"].metrics == ("org.apache.kafka.producer.",)
        assert reader.version > before
        assert reader.list_fresh() == ["producers"]
        writer.update("producers", lambda _current: {})  # every key deleted: the subscription goes
        assert reader.list_fresh() == []
        assert reader.read_fresh("producers") == {}
    finally:
        writer.close()
        reader.close()
        writer_store.close()
        reader_store.close()
