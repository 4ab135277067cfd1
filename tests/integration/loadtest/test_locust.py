"""loadtest/locustfile.py: a short headless locust run against a real broker.

Locust runs as a subprocess (its own gevent-patched interpreter) with 8 users (6 producers,
2 consumers of one group); its CSV stats must show produce, consume and commit events and
no failure, and the broker, asked independently, must hold the records and the group's
committed offsets.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LOCUSTFILE = os.path.join(ROOT_DIR, "loadtest", "locustfile.py")
PARTITIONS = 4
LOCUST_TIMEOUT = 60


def run_locust(broker: Any, tmp_path: Any, topic: str, group: str, *extra: str, seconds: int = 8,
               host: str | None = None) -> dict[str, Any]:
    prefix = str(tmp_path / "run")
    command = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "-u", "8", "-r", "8", "-t", f"{seconds}s",
               "--csv", prefix, "--host", host or broker.bootstrap, "--only-summary",
               "--castle-topic", topic, "--castle-group", group, "--castle-partitions", str(PARTITIONS),
               "--castle-rate", "50", *extra]
    process = subprocess.Popen(command, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=LOCUST_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: locust and nothing else
        output, _ = process.communicate(timeout=10)
        pytest.fail(f"locust did not finish in {LOCUST_TIMEOUT} s:\n{output.decode(errors='replace')}")
    text = output.decode(errors="replace")
    with open(prefix + "_stats.csv", newline="") as handle:
        stats = {(row["Type"], row["Name"]): row for row in csv.DictReader(handle)}
    with open(prefix + "_failures.csv", newline="") as handle:
        failures = list(csv.DictReader(handle))
    return {"code": process.returncode, "output": text, "stats": stats, "failures": failures}


def check_run(run: dict[str, Any], topic: str) -> None:
    output = run["output"]
    assert run["code"] == 0, f"locust exited with {run['code']}:\n{output}"
    assert run["failures"] == [], f"failures: {run['failures']}\n{output}"
    assert "Traceback" not in output, output
    for kind in ("produce", "consume", "commit"):
        row = run["stats"].get((kind, topic))
        assert row is not None, f"no {kind} events for {topic}:\n{output}"
        assert int(row["Request Count"]) > 0, f"{kind}: {row}"
        assert int(row["Failure Count"]) == 0, f"{kind}: {row}"
    assert float(run["stats"][("produce", topic)]["Average Content Size"]) > 0
    assert int(run["stats"][("", "Aggregated")]["Failure Count"]) == 0


def check_broker(bootstrap: str, topic: str, group: str) -> None:
    """The broker, asked directly: records in the topic, offsets committed for the group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        highs = [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
        assert sum(highs) > 0, f"no records in {topic}: {highs}"
        committed = consumer.committed(partitions, timeout=10)
        assert any(tp.offset >= 0 for tp in committed), f"no committed offsets for {group}: {committed}"
        for tp, high in zip(committed, highs):
            assert tp.error is None
            assert tp.offset <= high, f"partition {tp.partition}: committed {tp.offset} beyond the end {high}"
    finally:
        consumer.close()


def test_locust_headless(broker, tmp_path):
    tag = uuid.uuid4().hex[:8]
    topic, group = f"locust-{tag}", f"locust-group-{tag}"
    run = run_locust(broker, tmp_path, topic, group)
    check_run(run, topic)
    check_broker(broker.bootstrap, topic, group)
    print(run["output"])  # the summary, for -s


def test_locust_zstd_large_records(broker, tmp_path):
    """zstd, acks=all, 16 KiB values, a few keys, commits by count too; --host as a kafka:// list."""
    tag = uuid.uuid4().hex[:8]
    topic, group = f"locust-zstd-{tag}", f"locust-zstd-group-{tag}"
    run = run_locust(broker, tmp_path, topic, group, "--castle-compression", "zstd", "--castle-acks", "all",
                     "--castle-record-size", "16384", "--castle-key-count", "5", "--castle-linger-ms", "20",
                     "--castle-commit-every", "100", seconds=7,
                     host=f"kafka://{broker.bootstrap},{broker.bootstrap}")
    check_run(run, topic)
    assert float(run["stats"][("produce", topic)]["Average Content Size"]) > 16384
    check_broker(broker.bootstrap, topic, group)
