"""The pure parts of loadtest/kafka_peer.py and loadtest/maven_jars.py: what they write
for Maven and for Kafka (the launch itself: tests/integration/loadtest/test_kafka_peer.py)."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadtest import kafka_peer, maven_jars


def test_a_cluster_id_is_sixteen_bytes_in_url_safe_base64_that_no_option_parser_mistakes() -> None:
    ids = {kafka_peer.cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        assert len(text) == 22 and not text.startswith("-") and "=" not in text
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_the_pom_lists_each_coordinate_in_order() -> None:
    pom = maven_jars.pom("castle-kafka-broker", kafka_peer.coordinates("4.4.0"))
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = [(d.findtext("m:groupId", namespaces=ns), d.findtext("m:artifactId", namespaces=ns),
             d.findtext("m:version", namespaces=ns)) for d in ET.fromstring(pom).iterfind(".//m:dependency", ns)]
    assert deps[0] == ("org.apache.kafka", "kafka_2.13", "4.4.0")  # first: its dependencies' versions win
    assert deps[1][1] == "log4j-slf4j-impl"
    assert kafka_peer.coordinates("3.9.1")[1].startswith("org.slf4j:slf4j-reload4j:")
    with pytest.raises(ValueError):
        maven_jars.pom("x", ["org.apache.kafka:kafka_2.13"])


def test_kraft_settings_make_one_node_both_broker_and_controller_on_two_ports(tmp_path: Path) -> None:
    settings = kafka_peer.server_settings("kraft", 9100, tmp_path / "data", 4, controller_port=9101)
    assert settings["process.roles"] == "broker,controller" and settings["node.id"] == "1"
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:9100,CONTROLLER://127.0.0.1:9101"
    assert settings["controller.quorum.bootstrap.servers"] == "127.0.0.1:9101"
    assert settings["num.partitions"] == "4" and settings["offsets.topic.replication.factor"] == "1"
    path = tmp_path / "server.properties"
    kafka_peer.write_properties(path, settings)
    assert f"log.dirs={tmp_path / 'data'}\n" in path.read_text()


def test_zookeeper_mode_is_refused_for_kafka_4(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no ZooKeeper mode"):
        kafka_peer.KafkaPeer(str(tmp_path / "kafka.log"), "4.4.0", "zookeeper")
    settings = kafka_peer.server_settings("zookeeper", 9100, tmp_path, 1, zookeeper="127.0.0.1:2181")
    assert settings["zookeeper.connect"] == "127.0.0.1:2181" and "process.roles" not in settings
