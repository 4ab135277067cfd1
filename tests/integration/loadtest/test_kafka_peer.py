"""loadtest/kafka_peer.py: Apache Kafka itself, started through the launcher the load
runner compares with, must take records and give them back to real clients, log to its
file, and be gone (stopped by its PID, its temporary folder removed) after stop().

Then the runner's --compare kafka end to end on a tiny workload: one warm-up round against
each broker that counts nowhere, one counted round against each, figures for both.
The first run fetches Kafka's jars with Maven (once per version, ~/.cache/castle-kafka-broker).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from loadtest.kafka_peer import DEFAULT_VERSION, KafkaPeer, missing_tools

pytestmark = [pytest.mark.integration, pytest.mark.kafka_peer, pytest.mark.timeout(900)]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECORDS = 20
WAIT_S = 60.0


@pytest.fixture(autouse=True)
def java_and_maven() -> None:
    """CI installs java and Maven (.ci/run): their absence is a failure, not a skip."""
    missing = missing_tools(DEFAULT_VERSION)
    if missing:
        pytest.fail(f"the Kafka peer needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:][:1] != b"Z"


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().decode().split("\0")


def _produce_and_consume(bootstrap: str, partitions: int) -> list[bytes]:
    topic = f"peer-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=WAIT_S)[topic].result(timeout=WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[str] = []
    for i in range(RECORDS):
        producer.produce(topic, value=f"record-{i}".encode(), key=str(i).encode(),
                         on_delivery=lambda err, _msg: failures.append(str(err)) if err else None)
    assert producer.flush(WAIT_S) == 0, "records still unacknowledged"
    assert not failures, failures
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("version, mode", [(DEFAULT_VERSION, "kraft"), ("3.9.1", "zookeeper")])
def test_the_peer_serves_records_and_is_stopped_by_its_pid(tmp_path: Path, version: str, mode: str) -> None:
    log = tmp_path / "out" / f"kafka-{version}.log"
    peer = KafkaPeer(str(log), version, mode, partitions=3, base_dir=str(tmp_path))
    pids, data = peer.pids, peer.dir
    try:
        peer.wait_ready()
        assert len(pids) == (1 if mode == "kraft" else 2)
        broker = _cmdline(peer.pid)
        assert "kafka.Kafka" in broker and "-Xmx1g" in broker
        assert os.getsid(peer.pid) == peer.pid  # a session of its own: a terminal's Ctrl-C does not reach it
        values = _produce_and_consume(peer.bootstrap, partitions=3)
        assert sorted(values) == sorted(f"record-{i}".encode() for i in range(RECORDS))
        assert (data / "server.properties").read_text().count("num.partitions=3") == 1
    finally:
        code = peer.stop()
    assert code == 143  # the JVM's exit after its shutdown hooks ran on SIGTERM (128 + 15), not a SIGKILL
    assert not any(_alive(pid) for pid in pids)
    assert not data.exists()
    text = log.read_text()
    assert "started (kafka.server.Kafka" in text  # KafkaRaftServer or KafkaServer
    assert "Shutdown completed" in text or "shut down completed" in text


def test_the_runner_compares_with_kafka_after_a_warm_up_round(tmp_path: Path) -> None:
    workload = tmp_path / "tiny.toml"
    workload.write_text('name = "tiny"\ntopics = 1\npartitions_per_topic = 2\nrecord_size = 100\nproducers = 1\n'
                        'consumers = 1\nconsumer_groups = 1\nrate = 2000\nduration_s = 3\nwarmup_s = 1\n')
    out = tmp_path / "out"
    # Each run's group joins anew: without the 3 s initial rebalance delay on either broker
    # (Kafka's shipped server.properties sets 0 too) the test takes seconds less.
    command = [sys.executable, "-m", "loadtest.runner", str(workload), "--start-castle", "--compare", "kafka",
               "--castle-override", "group.initial.rebalance.delay.ms=0",
               "--kafka-override", "group.initial.rebalance.delay.ms=0",
               "--no-limits", "--no-progress", "--out", str(out)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        _, err = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    kafka = f"kafka-{DEFAULT_VERSION}"
    assert summary["targets"] == ["castle", kafka] and summary["warmup_rounds"] == 1
    entry = summary["workloads"]["tiny"]
    assert entry["runs"] == {"castle": ["tiny-castle-r1"], kafka: [f"tiny-{kafka}-r1"]}  # warm-ups not counted
    for name in ("castle", kafka):
        assert (out / f"tiny-{name}-warmup1.json").exists()
        result = json.loads((out / f"tiny-{name}-r1.json").read_text())
        assert result["publish"]["records"] > 0 and result["publish"]["errors"] == 0
        assert result["consume"]["missing"] == 0
        assert result["broker"]["cpu_s_per_m_records"] > 0  # Kafka's JVM measured as Castle's tree is
        assert result["broker"]["rss_anon_mib_max"] > 0
    assert "ratios" in entry
    assert (out / f"kafka-{DEFAULT_VERSION}.log").stat().st_size > 0
    assert not list(out.glob(f"kafka-{DEFAULT_VERSION}-*/"))  # its data folder removed on stop
    assert f"Kafka {DEFAULT_VERSION} exited with 143" in err
