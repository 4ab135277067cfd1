"""Paths and JSON of every znode Castle keeps in ZooKeeper: one small class per znode.

The layout (docs/ARCHITECTURE.md, "ZooKeeper layout"), relative to the chroot of
``zookeeper.connect``::

    /cluster/id                                    {"version":"1","id":"<22-char base64url uuid>"}
    /brokers/ids/<id>                              ephemeral, Kafka's broker registration v5:
        {"version":5,"host":h,"port":p,"endpoints":["PLAINTEXT://h:p"],
         "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
         "jmx_port":-1,"rack":null,"timestamp":"<ms>"}
    /brokers/topics/<topic>                        {"version":3,"topic_id":"<base64url uuid>",
                                                    "partitions":{"0":[1,2],...},
                                                    "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<topic>/partitions/<p>/state   {"controller_epoch":N,"leader":id,"version":1,
                                                    "leader_epoch":N,"isr":[...]}
    /config/topics/<topic>                         {"version":1,"config":{"retention.ms":"..."}}
    /latest_producer_id_block                      {"version":1,"broker":id,"block_start":"0","block_end":"999"}
    /consumers/coordinator                         ephemeral {"version":1,"brokerid":N,"timestamp":"<ms>"}
    /consumers/coordinator_epoch                   the epoch as decimal text ("7")
    /consumers/<group>/ids/<member>                JSON, the member as the coordinator sees it
    /consumers/<group>/owners/<topic>/<partition>  the owning member id as text

The JSON shapes are Apache Kafka's (kafka.zk.ZkData: BrokerIdZNode, TopicZNode,
TopicPartitionStateZNode, ConfigEntityZNode, ClusterIdZNode, ControllerZNode,
ControllerEpochZNode, ProducerIdBlockZNode), so zkCli habits and Kafka's own tooling read
them; /consumers/coordinator is Kafka's /controller under Castle's name. Numbers that Kafka
writes as strings (timestamps, producer id block bounds, the cluster id version) stay
strings. Decoders accept older Kafka versions where the difference is harmless (a missing
"adding_replicas", a broker registration without "endpoints") and raise ValueError on
anything they cannot read, naming the path.

Group and member names are free text in Kafka, but a znode name cannot hold "/", be "." or
"..", and a group called "coordinator" would collide with the election znodes; names are
therefore percent-encoded (``znode_name``) the way Kafka's Sanitizer encodes config entity
names, and the few names that stay ambiguous get their first character escaped too.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import quote, unquote

import orjson

from storage.checkpoint import base64url_to_uuid, uuid_to_base64url

log = logging.getLogger(__name__)

# Names under /consumers that belong to the election, not to groups.
_RESERVED_GROUP_NAMES = frozenset({"coordinator", "coordinator_epoch", ".", ".."})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def znode_name(text: str) -> str:
    """A free-text name made safe as one path component; inverse: ``unquote``."""
    if text == "":
        return "%"  # quote() escapes "%" itself, so a lone "%" names nothing else
    name = quote(text, safe="")
    if name in _RESERVED_GROUP_NAMES:
        # quote() never escapes letters or '.', so "%63oordinator" / "%2E" cannot be
        # produced by any other name: the mapping stays one-to-one.
        name = f"%{ord(name[0]):02X}{name[1:]}"
    return name


def from_znode_name(name: str) -> str:
    return "" if name == "%" else unquote(name)


def _load(path: str, data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {data[:200]!r}") from exc


def _object(path: str, data: bytes) -> dict[str, Any]:
    doc = _load(path, data)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object, got {data[:200]!r}")
    return doc


# ----------------------------------------------------------------------------- cluster id
class ClusterIdZNode:
    PATH = "/cluster/id"

    @staticmethod
    def path() -> str:
        return ClusterIdZNode.PATH

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return orjson.dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        doc = _object(ClusterIdZNode.PATH, data)
        cluster_id = doc.get("id")
        if not isinstance(cluster_id, str) or not cluster_id:
            raise ValueError(f"{ClusterIdZNode.PATH}: no cluster id in {data[:200]!r}")
        return cluster_id


class BrokerSecretZNode:
    """/castle/broker_secret: 32 random bytes, hex, created once by the first broker. Who can
    read ZooKeeper can act as a broker, as with Kafka's ZooKeeper mode (ZooKeeper is trusted)."""

    PATH = "/castle/broker_secret"

    @staticmethod
    def encode(secret: bytes) -> bytes:
        return orjson.dumps({"version": 1, "secret": secret.hex()})

    @staticmethod
    def decode(data: bytes) -> bytes:
        doc = _object(BrokerSecretZNode.PATH, data)
        try:
            secret = bytes.fromhex(str(doc["secret"]))
        except (KeyError, ValueError):
            raise ValueError(f"{BrokerSecretZNode.PATH}: no secret in {data[:100]!r}") from None
        if len(secret) < 16:
            raise ValueError(f"{BrokerSecretZNode.PATH}: a secret of {len(secret)} bytes is too short")
        return secret


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 base64url characters."""
    return uuid_to_base64url(uuid.uuid4())


# ----------------------------------------------------------------------------- brokers
Address = tuple[str, int]
Endpoints = Mapping[str, Address]  # listener name -> (host, port)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    host: str  # Kafka's host and port: the PLAINTEXT protocol's endpoint, else the first
    port: int
    timestamp_ms: int
    endpoints: Mapping[str, Address]  # every listener: name -> (host, port)


class BrokerIdsZNode:
    PATH = "/brokers/ids"

    @staticmethod
    def path() -> str:
        return BrokerIdsZNode.PATH


class BrokerIdZNode:
    VERSION = 5

    @staticmethod
    def path(node_id: int) -> str:
        return f"{BrokerIdsZNode.PATH}/{node_id}"

    @staticmethod
    def encode(endpoints: Endpoints, protocol_map: Mapping[str, str] | None = None, timestamp_ms: int | None = None) -> bytes:
        """Kafka's v5 registration: every listener's endpoint and the map of the listeners
        it names; host and port are the PLAINTEXT-protocol listener's (null and -1 without
        one), which old tools read."""
        protocols = {name: (protocol_map or {}).get(name, name) for name in endpoints}
        plain = next((address for name, address in endpoints.items() if protocols[name] == "PLAINTEXT"), None)
        return orjson.dumps({
            "version": BrokerIdZNode.VERSION,
            "host": plain[0] if plain else None,
            "port": plain[1] if plain else -1,
            "endpoints": [f"{name}://{_host_part(host)}:{port}" for name, (host, port) in endpoints.items()],
            "listener_security_protocol_map": protocols,
            "jmx_port": -1,
            "rack": None,
            "timestamp": str(now_ms() if timestamp_ms is None else timestamp_ms),
        })

    @staticmethod
    def decode(node_id: int, data: bytes) -> BrokerRegistration:
        path = BrokerIdZNode.path(node_id)
        doc = _object(path, data)
        endpoints: dict[str, Address] = {}
        for text in doc.get("endpoints") or ():
            name, address = _split_endpoint(path, str(text))
            endpoints[name] = address
        host, port = doc.get("host"), doc.get("port")
        # Kafka writes host=null/port=-1 when the broker has no PLAINTEXT listener; the
        # first endpoint then says where it is.
        if (not isinstance(host, str) or not isinstance(port, int) or port < 0) and endpoints:
            host, port = next(iter(endpoints.values()))
        if not isinstance(host, str) or not isinstance(port, int):
            raise ValueError(f"{path}: no host and port in {data[:200]!r}")
        if not endpoints:  # a registration older than endpoints (version 1)
            endpoints["PLAINTEXT"] = (host, port)
        try:
            stamp = int(doc.get("timestamp", 0))
        except (TypeError, ValueError):
            stamp = 0
        return BrokerRegistration(host, port, stamp, endpoints)


def _host_part(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _split_endpoint(path: str, endpoint: str) -> tuple[str, Address]:
    """"LISTENER://host:port" (host may be a bracketed IPv6 address) -> (LISTENER, (host, port))."""
    name, sep, rest = endpoint.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not port.isdigit():
        raise ValueError(f"{path}: bad endpoint {endpoint!r}")
    return name.upper(), (host.strip("[]"), int(port))


# ----------------------------------------------------------------------------- topics
class TopicsZNode:
    PATH = "/brokers/topics"

    @staticmethod
    def path() -> str:
        return TopicsZNode.PATH


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic_id: uuid.UUID | None          # None only in znodes written by Kafka before 2.8
    replicas: dict[int, list[int]]      # partition -> replica broker ids, leader first
    # A reassignment in progress (KIP-455): the replicas being added and being removed; the
    # replica list meanwhile holds both (the target first).
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


class TopicZNode:
    VERSION = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.PATH}/{topic}"

    @staticmethod
    def encode(topic_id: uuid.UUID, replicas: Mapping[int, list[int]], adding: Mapping[int, list[int]] | None = None,
               removing: Mapping[int, list[int]] | None = None) -> bytes:
        return orjson.dumps({
            "version": TopicZNode.VERSION,
            "topic_id": uuid_to_base64url(topic_id),
            "partitions": {str(p): list(replicas[p]) for p in sorted(replicas)},
            "adding_replicas": {str(p): list(b) for p, b in sorted((adding or {}).items()) if b},
            "removing_replicas": {str(p): list(b) for p, b in sorted((removing or {}).items()) if b},
        })

    @staticmethod
    def decode(topic: str, data: bytes) -> TopicAssignment:
        path = TopicZNode.path(topic)
        doc = _object(path, data)
        raw_id = doc.get("topic_id")
        try:
            topic_id = base64url_to_uuid(raw_id) if isinstance(raw_id, str) else None
            replicas = {int(p): [int(b) for b in brokers] for p, brokers in (doc.get("partitions") or {}).items()}
            adding = {int(p): [int(b) for b in brokers] for p, brokers in (doc.get("adding_replicas") or {}).items()}
            removing = {int(p): [int(b) for b in brokers] for p, brokers in (doc.get("removing_replicas") or {}).items()}
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: {exc}: {data[:200]!r}") from exc
        if sorted(replicas) != list(range(len(replicas))):
            raise ValueError(f"{path}: partitions are not 0..n-1: {sorted(replicas)}")
        return TopicAssignment(topic_id, replicas, adding, removing)


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int  # -1: none (every in-sync replica is down)
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1  # the znode's version when read: changes are written conditionally on it

    def with_isr(self, isr: list[int]) -> "PartitionState":
        return PartitionState(self.leader, self.leader_epoch, list(isr), self.controller_epoch, self.zk_version)


class TopicPartitionStateZNode:
    VERSION = 1

    @staticmethod
    def partitions_path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"

    @staticmethod
    def partition_path(topic: str, partition: int) -> str:
        return f"{TopicPartitionStateZNode.partitions_path(topic)}/{partition}"

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionStateZNode.partition_path(topic, partition)}/state"

    @staticmethod
    def encode(state: PartitionState) -> bytes:
        return orjson.dumps({
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": TopicPartitionStateZNode.VERSION,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        })

    @staticmethod
    def decode(topic: str, partition: int, data: bytes, zk_version: int = -1) -> PartitionState:
        path = TopicPartitionStateZNode.path(topic, partition)
        doc = _object(path, data)
        try:
            return PartitionState(int(doc["leader"]), int(doc["leader_epoch"]),
                                  [int(b) for b in doc["isr"]], int(doc["controller_epoch"]), zk_version)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc!r} in {data[:200]!r}") from exc


class LogDirsZNode:
    """/castle/log_dirs/<node id>: the directory.id of each log dir the broker last ran
    with (persistent, Castle's own). A broker that starts with other ids lost its data."""

    @staticmethod
    def path(node_id: int) -> str:
        return f"/castle/log_dirs/{node_id}"

    @staticmethod
    def encode(directory_ids: list[str]) -> bytes:
        return orjson.dumps({"version": 1, "directory_ids": sorted(directory_ids)})

    @staticmethod
    def decode(node_id: int, data: bytes) -> list[str]:
        doc = _object(LogDirsZNode.path(node_id), data)
        ids = doc.get("directory_ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"{LogDirsZNode.path(node_id)}: directory_ids must be a list of strings")
        return sorted(ids)


class TopicConfigZNode:
    ROOT = "/config/topics"
    VERSION = 1

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicConfigZNode.ROOT}/{topic}"

    @staticmethod
    def encode(configs: Mapping[str, str]) -> bytes:
        return orjson.dumps({"version": TopicConfigZNode.VERSION, "config": dict(configs)},
                            option=orjson.OPT_SORT_KEYS)

    @staticmethod
    def decode(topic: str, data: bytes | None) -> dict[str, str]:
        # Kafka writes the node with null data in some paths; that means "no overrides".
        if not data:
            return {}
        doc = _object(TopicConfigZNode.path(topic), data)
        config = doc.get("config") or {}
        if not isinstance(config, dict):
            raise ValueError(f"{TopicConfigZNode.path(topic)}: config is not an object")
        return {str(k): str(v) for k, v in config.items()}


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    broker: int
    block_start: int
    block_end: int      # inclusive, as in Kafka


class ProducerIdBlockZNode:
    PATH = "/latest_producer_id_block"
    VERSION = 1

    @staticmethod
    def path() -> str:
        return ProducerIdBlockZNode.PATH

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return orjson.dumps({"version": ProducerIdBlockZNode.VERSION, "broker": block.broker,
                             "block_start": str(block.block_start), "block_end": str(block.block_end)})

    @staticmethod
    def decode(data: bytes) -> ProducerIdBlock:
        doc = _object(ProducerIdBlockZNode.PATH, data)
        try:
            return ProducerIdBlock(int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{ProducerIdBlockZNode.PATH}: {exc!r} in {data[:200]!r}") from exc


# ----------------------------------------------------------------------------- election
class ConsumersZNode:
    PATH = "/consumers"

    @staticmethod
    def path() -> str:
        return ConsumersZNode.PATH


class CoordinatorZNode:
    PATH = "/consumers/coordinator"
    VERSION = 1

    @staticmethod
    def path() -> str:
        return CoordinatorZNode.PATH

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        return orjson.dumps({"version": CoordinatorZNode.VERSION, "brokerid": broker_id,
                             "timestamp": str(now_ms() if timestamp_ms is None else timestamp_ms)})

    @staticmethod
    def decode(data: bytes) -> int:
        """The broker id of the coordinator."""
        doc = _object(CoordinatorZNode.PATH, data)
        broker_id = doc.get("brokerid")
        if not isinstance(broker_id, int):
            raise ValueError(f"{CoordinatorZNode.PATH}: no brokerid in {data[:200]!r}")
        return broker_id


class CoordinatorEpochZNode:
    PATH = "/consumers/coordinator_epoch"

    @staticmethod
    def path() -> str:
        return CoordinatorEpochZNode.PATH

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @staticmethod
    def decode(data: bytes) -> int:
        try:
            return int(data.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"{CoordinatorEpochZNode.PATH}: not a decimal epoch: {data[:50]!r}") from exc


# ----------------------------------------------------------------------------- group mirror
class GroupZNode:
    @staticmethod
    def path(group: str) -> str:
        return f"{ConsumersZNode.PATH}/{znode_name(group)}"

    @staticmethod
    def ids_path(group: str) -> str:
        return f"{GroupZNode.path(group)}/ids"

    @staticmethod
    def owners_path(group: str) -> str:
        return f"{GroupZNode.path(group)}/owners"


class GroupMemberZNode:
    VERSION = 1

    @staticmethod
    def path(group: str, member_id: str) -> str:
        return f"{GroupZNode.ids_path(group)}/{znode_name(member_id)}"

    @staticmethod
    def encode(client_id: str, client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
               group_instance_id: str | None = None, subscription: list[str] | None = None,
               timestamp_ms: int | None = None) -> bytes:
        return orjson.dumps({
            "version": GroupMemberZNode.VERSION,
            "client_id": client_id,
            "client_host": client_host,
            "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": rebalance_timeout_ms,
            "group_instance_id": group_instance_id,
            "subscription": sorted(subscription or []),
            "timestamp": str(now_ms() if timestamp_ms is None else timestamp_ms),
        })

    @staticmethod
    def decode(data: bytes) -> dict[str, Any]:
        return _object("member", data)


class GroupOwnerZNode:
    @staticmethod
    def topic_path(group: str, topic: str) -> str:
        return f"{GroupZNode.owners_path(group)}/{topic}"

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"{GroupOwnerZNode.topic_path(group, topic)}/{partition}"

    @staticmethod
    def encode(member_id: str) -> bytes:
        return member_id.encode("utf-8")

    @staticmethod
    def decode(data: bytes) -> str:
        return data.decode("utf-8")


# Persistent parents created once at start; everything else hangs below them.
PERSISTENT_ROOTS = (BrokerIdsZNode.PATH, TopicsZNode.PATH, TopicConfigZNode.ROOT, ConsumersZNode.PATH, "/cluster")
