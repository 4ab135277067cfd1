"""The README's two-broker ZooKeeper example, run as written on one host.

The commands are read from README.md itself; only the ZooKeeper address is the test's
own server (a chroot of its own), and the castle script is the one of this venv. Kafka
brokers on one host need nothing but their own node.id, listeners and log.dirs: so must
Castle's (the default Prometheus port is the first broker's; the second serves none).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import castle_command, round_trip, wait_until
from tests.zookeeper_server import ZooKeeperServer

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper, pytest.mark.timeout(180)]

README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


def readme_cluster_commands() -> list[str]:
    """The ``castle serve`` commands of the README's cluster section, continuation lines joined."""
    with open(README, encoding="utf-8") as handle:
        text = handle.read()
    section = text.split("### A cluster of brokers on ZooKeeper", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "the README's cluster section has no sh block"
    joined = block.group(1).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if "castle serve" in line]


def test_the_readmes_cluster_commands_work_verbatim_on_one_host(zookeeper_server: ZooKeeperServer,
                                                                 tmp_path: Any) -> None:
    commands = readme_cluster_commands()
    assert len(commands) == 2
    chroot = f"/readme-{uuid.uuid4().hex}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        for command in commands:
            argv = shlex.split(command.replace("127.0.0.1:2181/castle", zookeeper_server.address + chroot))
            assert argv[0] == ".venv/bin/castle"
            log = open(tmp_path / f"broker-{len(started) + 1}.log", "wb")
            started.append(subprocess.Popen(castle_command() + argv[1:], cwd=tmp_path, stdout=log, stderr=log))
        for port in (9092, 9093):
            wait_until(lambda: round_trip("127.0.0.1", port), 30, f"a broker on {port}")
        admin = AdminClient({"bootstrap.servers": "127.0.0.1:9093"})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 2, 30, "both brokers in Metadata")
        admin.create_topics([NewTopic("readme", 4, 1)])["readme"].result(30)
        metadata = admin.list_topics("readme", timeout=10).topics["readme"]
        assert {p.leader for p in metadata.partitions.values()} == {1, 2}  # spread over both

        producer = Producer({"bootstrap.servers": "127.0.0.1:9092", "enable.idempotence": True})
        for i in range(40):
            producer.produce("readme", value=f"v{i}".encode(), partition=i % 4)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": "127.0.0.1:9093", "group.id": "readme",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["readme"])
        seen: set[bytes] = set()
        try:
            wait_until(lambda: _poll_into(consumer, seen) >= 40, 60, "all 40 records through the group")
        finally:
            consumer.close()
        assert seen == {f"v{i}".encode() for i in range(40)}

        # One broker took the default Prometheus port (whichever bound it first); the other
        # said why it has none.
        with urllib.request.urlopen("http://127.0.0.1:9308/metrics", timeout=10) as answer:
            assert b"castle_" in answer.read()
        warned = [b"no Prometheus endpoint" in (tmp_path / f"broker-{i}.log").read_bytes() for i in (1, 2)]
        assert sorted(warned) == [False, True]
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            assert process.wait(60) == 0
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(30)
    assert os.path.isdir(tmp_path / "data1") and os.path.isdir(tmp_path / "data2")


def _poll_into(consumer: Consumer, seen: set[bytes]) -> int:
    message = consumer.poll(0.5)
    if message is not None and message.error() is None:
        seen.add(message.value())
    return len(seen)
