"""SIGHUP reloads the dynamic settings (broker/process/reload.py) without dropping a connection;
a file that no longer loads changes nothing; log lines carry their process's role, as text
or JSON (broker/process/logs.py), and DEBUG adds the request log."""

from __future__ import annotations

import os
import signal
from typing import Any

import orjson
import pytest

from tests.integration.clients import confluent_produce, make_records
from tests.integration.conftest import wait_until
from tests.integration.kio_client import KioClient
from tests.integration.protocol.test_protocol_raw import _req

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# Time retention off: the records carry 2023 timestamps, which the default 7 days would delete
# at the first check, before the reload under test.
BASE = {"log.retention.check.interval.ms": "300", "log.segment.bytes": "4096", "log.level": "INFO",
        "log.retention.ms": "-1"}


def write_properties(path: str, settings: dict[str, str]) -> None:
    with open(path, "w") as handle:
        handle.write("# written by test_reload\n")
        for key, value in settings.items():
            handle.write(f"{key}={value}\n")


def start_from_file(broker_factory: Any, tmp_path: Any, settings: dict[str, str], **overrides: str) -> tuple[Any, str]:
    path = os.path.join(str(tmp_path), "castle.properties")
    write_properties(path, settings)
    broker = broker_factory(workers=2, overrides=overrides, start=False)
    broker.config_file = path
    broker.start()
    return broker, path


def log_start(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low)
    finally:
        consumer.close()


def test_sighup_applies_retention_and_log_level_and_keeps_connections(broker_factory: Any, tmp_path: Any) -> None:
    broker, path = start_from_file(broker_factory, tmp_path, BASE)
    topic = "reloaded"
    # Small batches (batch.size) so they fit the small segments and make many of them.
    confluent_produce(broker.bootstrap, topic, make_records(300, 1, "reload"), **{"batch.size": 2048})
    assert log_start(broker.bootstrap, topic) == 0
    held = KioClient(broker.bootstrap)
    try:
        assert held.call(18, 3, _req(18, 3, {"client_software_name": "t", "client_software_version": "1"})).error_code == 0
        write_properties(path, {**BASE, "log.retention.bytes": "8192", "log.level": "DEBUG"})
        os.kill(broker.pid, signal.SIGHUP)
        wait_until(lambda: log_start(broker.bootstrap, topic) > 0, 20, "retention applied after SIGHUP")
        # The connection opened before the reload still answers, and is now in the request log.
        assert held.call(18, 3, _req(18, 3, {"client_software_name": "t", "client_software_version": "1"})).error_code == 0
        wait_until(lambda: "castle.requests" in broker.stderr(400) and "api=ApiVersions" in broker.stderr(400), 10,
                   "the DEBUG request log")
    finally:
        held.close()
    text = broker.stderr(1000)
    assert "SIGHUP: reloaded log.level=DEBUG log.retention.bytes=8192" in text
    assert text.count("reloaded") >= 3  # the supervisor and both workers
    assert len(broker.worker_pids()) == 2


def test_a_broken_file_or_a_static_change_keeps_the_running_settings(broker_factory: Any, tmp_path: Any) -> None:
    broker, path = start_from_file(broker_factory, tmp_path, BASE)
    pids = broker.worker_pids()
    write_properties(path, {**BASE, "log.retention.bytes": "many"})
    os.kill(broker.pid, signal.SIGHUP)
    wait_until(lambda: "keeping the current settings" in broker.stderr(), 10, "the refusal logged")
    assert "bad value for log.retention.bytes" in broker.stderr()
    write_properties(path, {**BASE, "num.partitions": "7"})
    os.kill(broker.pid, signal.SIGHUP)
    wait_until(lambda: "num.partitions changed; that takes a restart" in broker.stderr(), 10, "the warning")
    confluent_produce(broker.bootstrap, "still-serving", make_records(10, 1, "after"))
    assert broker.worker_pids() == pids


def test_json_log_lines_name_their_process(broker_factory: Any) -> None:
    broker = broker_factory(workers=2, overrides={"log.format": "json"})
    confluent_produce(broker.bootstrap, "json-logs", make_records(5, 1, "json"))
    broker.stop()
    lines = [line for line in broker.stderr(1000).splitlines() if line and not line.startswith("-----")]
    entries = [orjson.loads(line) for line in lines]  # every line is one JSON object
    assert {e["role"] for e in entries} >= {"supervisor", "worker 0", "worker 1", "coordinator"}
    assert all({"time", "level", "pid", "logger", "message"} <= set(e) for e in entries)


def test_sighup_applies_a_new_producer_id_expiration(broker_factory: Any, tmp_path: Any) -> None:
    """producer.id.expiration.ms is dynamic, as in Kafka: an idempotent producer's state,
    kept for the default day, goes at the next check once a reload shortens it."""
    from tests.integration.protocol.test_transactions_admin import describe_producers

    settings = {**BASE, "producer.id.expiration.check.interval.ms": "300"}
    broker, path = start_from_file(broker_factory, tmp_path, settings)
    topic = "expiring-producers"
    confluent_produce(broker.bootstrap, topic, make_records(20, 1, "idempotent"), **{"batch.size": 2048})
    with KioClient(broker.bootstrap) as client:
        def active() -> int:
            return len(describe_producers(client, {topic: [0]})[(topic, 0)].active_producers)

        assert active() == 1
        write_properties(path, {**settings, "producer.id.expiration.ms": "1000"})
        os.kill(broker.pid, signal.SIGHUP)
        wait_until(lambda: active() == 0, 20, "the producer expired under the reloaded setting")
    assert "reloaded producer.id.expiration.ms=1000" in broker.stderr(1000)
