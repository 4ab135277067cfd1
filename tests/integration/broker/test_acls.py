"""Kafka's authorization (ACLs) from the outside: real clients and raw requests against a
broker running Kafka's authorizer, with Kafka's answers checked code by code.

One module-scoped broker (two workers, so both processes' copies of the ACLs are reached)
runs ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`` with
``super.users=User:admin`` and ``allow.everyone.if.no.acl.found=false``; it listens on
PLAINTEXT (``User:ANONYMOUS``) and SASL_PLAINTEXT, whose users (admin, alice, bob, mallory)
are written offline with ``castle users set --broker-config`` before it starts. The module
restarts it once (the ACLs survive in ``acls.json``); a one-worker broker without an
authorizer answers SECURITY_DISABLED. Every broker is stopped by its PID by the harness.

Each test grants what it needs through AdminClient as admin (the ``grants`` fixture) and
removes exactly that afterwards. ACL changes reach each worker through the store's watch
(a poll every 0.25 s), so a change is followed by ``ACL_SETTLE`` seconds of waiting.
Raw kio requests are used where a client library would hide the code a broker answered.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from storage.records import Record, encode_batch, iter_batches
from tests.integration.conftest import Broker, castle_command, free_port, stop_all
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.security, pytest.mark.timeout(120)]

HOST = "127.0.0.1"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
MECHANISM = "SCRAM-SHA-256"
PASSWORDS = {"admin": "admin-Secret-0", "alice": "alice-Secret-1", "bob": "bob-Secret-2", "mallory": "mallory-Secret-3"}
ACL_SETTLE = 1.0  # the ACL file's watch polls every 0.25 s in each worker

# Kafka's error codes
INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SECURITY_DISABLED = 54

# Kafka's ACL codes (org.apache.kafka.common.resource / acl)
RT_ANY, RT_TOPIC, RT_GROUP, RT_CLUSTER, RT_TRANSACTIONAL_ID = 1, 2, 3, 4, 5
RT_GROUP_CONFIG = 32  # ConfigResource.Type.GROUP (the config resource, not the ACL resource type)
# Kafka's resource type names -> codes (librdkafka calls CLUSTER "BROKER").
RESOURCE_TYPES = {"ANY": RT_ANY, "TOPIC": RT_TOPIC, "GROUP": RT_GROUP, "CLUSTER": RT_CLUSTER,
                  "TRANSACTIONAL_ID": RT_TRANSACTIONAL_ID}
RESOURCE_NAMES = {code: name for name, code in RESOURCE_TYPES.items()}
PT_ANY, PT_LITERAL = 1, 3
OP_ANY, PERM_ANY = 1, 1


# ---------------------------------------------------------------------- the broker
@dataclass
class AclBroker:
    broker: Broker
    sasl_port: int
    admins: dict[str, Any] = field(default_factory=dict)  # user -> AdminClient, kept alive with the broker

    @property
    def sasl(self) -> str:
        return f"{HOST}:{self.sasl_port}"

    @property
    def plaintext(self) -> str:
        return self.broker.bootstrap


def set_user_offline(broker: Broker, user: str, password: str) -> None:
    assert broker.config_file is not None
    done = subprocess.run(castle_command() + ["users", "set", user, "--broker-config", broker.config_file,
                                              "--override", f"log.dirs={broker.log_dir}", "--password-stdin"],
                          input=password + "\n", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"castle users set {user} (offline) exited {done.returncode}: {done.stderr}"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    with running_acl_broker(str(tmp_path_factory.mktemp("acls"))) as secured:
        yield secured


@contextlib.contextmanager
def running_acl_broker(base: str, **settings: Any) -> Iterator[AclBroker]:
    """A broker with the authorizer on, a PLAINTEXT and a SASL_PLAINTEXT listener, the users of
    PASSWORDS and ``settings`` on top; stopped (and checked to stop cleanly) at the end."""
    broker = Broker(base, 2, {})
    sasl_port = free_port()
    while sasl_port in (broker.port, broker.metrics_port):
        sasl_port = free_port()
    listeners = f"PLAINTEXT://{HOST}:{broker.port},SASL_PLAINTEXT://{HOST}:{sasl_port}"
    config = {"listeners": listeners, "authorizer.class.name": AUTHORIZER, "super.users": "User:admin",
              "allow.everyone.if.no.acl.found": "false", "num.partitions": 2,
              "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2, **settings}
    broker.config_file = os.path.join(base, "server.properties")
    with open(broker.config_file, "w") as handle:
        handle.write("".join(f"{key}={value}\n" for key, value in config.items()))
    broker.overrides["listeners"] = listeners  # else the harness's PLAINTEXT-only default wins over the file
    try:
        for user, password in PASSWORDS.items():
            set_user_offline(broker, user, password)
        broker.start()
        secured = AclBroker(broker, sasl_port)
        yield secured
        secured.admins.clear()
        gc.collect()  # the AdminClients go here, on the main thread
    finally:
        unclean = stop_all([broker])
        assert not unclean, f"broker did not stop cleanly: {unclean}"


@pytest.fixture
def s(request: pytest.FixtureRequest, acl_broker: AclBroker) -> AclBroker:
    request.node._castle_brokers = [acl_broker.broker]  # its stderr goes into a failed test's report
    return acl_broker


# ---------------------------------------------------------------------- clients
def settings(s: AclBroker, user: str) -> dict[str, Any]:
    """librdkafka settings for ``user`` on the SASL_PLAINTEXT listener."""
    return {"bootstrap.servers": s.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM,
            "sasl.username": user, "sasl.password": PASSWORDS[user]}


def admin_client(s: AclBroker, user: str = "admin") -> Any:
    """``user``'s AdminClient (one per user for the module: a client freed while its
    futures are pending fails them with _DESTROY)."""
    from confluent_kafka.admin import AdminClient

    if user not in s.admins:
        s.admins[user] = AdminClient(settings(s, user))
    return s.admins[user]


def acl(resource_type: str, name: str, principal: str, operation: str, *, pattern: str = "LITERAL", host: str = "*",
        permission: str = "ALLOW") -> Any:
    """A confluent AclBinding from the enums' names: acl("TOPIC", "t1", "User:alice", "WRITE")."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return AclBinding(ResourceType(RESOURCE_TYPES[resource_type]), name, ResourcePatternType[pattern], principal, host,
                      AclOperation[operation], AclPermissionType[permission])


def acl_filter(resource_type: str = "ANY", name: str | None = None, pattern: str = "ANY", principal: str | None = None,
               host: str | None = None, operation: str = "ANY", permission: str = "ANY") -> Any:
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    who: Any = principal
    where: Any = host
    named: Any = name
    return AclBindingFilter(ResourceType(RESOURCE_TYPES[resource_type]), named, ResourcePatternType[pattern], who, where,
                            AclOperation[operation], AclPermissionType[permission])


def as_filter(binding: Any) -> Any:
    """The filter matching exactly ``binding``."""
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                            binding.host, binding.operation, binding.permission_type)


Acl = tuple[str, str, str, str, str, str, str]


def key(binding: Any) -> Acl:
    """A binding as comparable names: (type, name, pattern, principal, host, operation, permission)."""
    return (RESOURCE_NAMES[binding.restype.value], binding.name, binding.resource_pattern_type.name, binding.principal, binding.host,
            binding.operation.name, binding.permission_type.name)


def describe(s: AclBroker, f: Any, user: str = "admin") -> set[Acl]:
    return {key(b) for b in admin_client(s, user).describe_acls(f, request_timeout=15).result(timeout=20)}


def delete(s: AclBroker, *filters: Any) -> list[set[Acl]]:
    futures = admin_client(s).delete_acls(list(filters), request_timeout=15)
    return [{key(b) for b in futures[f].result(timeout=20)} for f in filters]


def kafka_error(future: Any) -> Any:
    """The KafkaError a failed admin future carries (fails if it succeeded)."""
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as caught:
        future.result(timeout=20)
    return caught.value.args[0]


class Grants:
    """ACLs a test creates as admin; removed (exactly those) when the test ends."""

    def __init__(self, s: AclBroker) -> None:
        self.s = s
        self.made: list[Any] = []
        self.filters: list[Any] = []

    def add(self, *bindings: Any) -> None:
        futures = admin_client(self.s).create_acls(list(bindings), request_timeout=15)
        self.made.extend(bindings)
        for binding in bindings:
            assert futures[binding].result(timeout=20) is None
        time.sleep(ACL_SETTLE)

    def also_remove(self, f: Any) -> None:
        """Remove what ``f`` matches at the end too (ACLs made by a command-line tool)."""
        self.filters.append(f)

    def remove_all(self) -> None:
        filters = [as_filter(b) for b in self.made] + self.filters
        if filters:
            delete(self.s, *filters)
            time.sleep(ACL_SETTLE)


@pytest.fixture
def grants(s: AclBroker) -> Iterator[Grants]:
    made = Grants(s)
    yield made
    made.remove_all()


def create_topics(s: AclBroker, *topics: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    futures = admin_client(s).create_topics([NewTopic(t, partitions, 1) for t in topics], request_timeout=15)
    for topic in topics:
        futures[topic].result(timeout=20)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def confluent_deliver(s: AclBroker, user: str, topic: str, values: list[bytes], **extra: Any) -> list[Any]:
    """Produce ``values`` as ``user``; each delivery report's error (None when delivered)."""
    from confluent_kafka import Producer

    reports: list[Any] = []
    producer = Producer({**settings(s, user), "message.timeout.ms": 15000, "linger.ms": 5, **extra})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: reports.append(err))
    left = producer.flush(30)
    assert left == 0 and len(reports) == len(values), f"{left} undelivered, {len(reports)} reports"
    return reports


# ---------------------------------------------------------------------- raw requests
def request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    entity = codec.request_class(api_key, version)
    assert entity is not None, f"no request class for api {api_key} v{version}"
    return build(entity, data)


class Raw(KioClient):
    """A kio connection, logged in with SASL PLAIN as ``user`` (else ANONYMOUS on PLAINTEXT)."""

    def __init__(self, bootstrap: str, user: str | None = None, client_id: str = "acl-tests") -> None:
        super().__init__(bootstrap, client_id=client_id)
        if user is not None:
            handshake = self.ask(17, 1, {"mechanism": "PLAIN"})
            assert handshake.error_code == 0, handshake
            answer = self.ask(36, 1, {"auth_bytes": f"\0{user}\0{PASSWORDS[user]}".encode()})
            assert answer.error_code == 0, answer

    def ask(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        return self.call(api_key, version, request(api_key, version, data))

    def __enter__(self) -> "Raw":
        return self

    # -- the requests the tests send
    def metadata(self, topics: list[str] | None = None) -> dict[str, int]:
        """Metadata v4: topic -> error code (all topics when ``topics`` is None)."""
        answer = self.ask(3, 4, {"topics": None if topics is None else [{"name": t} for t in topics],
                                 "allow_auto_topic_creation": False})
        return {t.name: int(t.error_code) for t in answer.topics}

    def produce(self, topic: str, value: bytes = b"v", partition: int = 0) -> int:
        batch = encode_batch([Record(0, int(time.time() * 1000), b"k", value, ())])
        answer = self.ask(0, 8, {"transactional_id": None, "acks": 1, "timeout": 10_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        return int(answer.responses[0].partition_responses[0].error_code)

    def fetch(self, topic: str, partition: int = 0, offset: int = 0, replica_id: int = -1) -> tuple[int, list[bytes]]:
        """Fetch v12: the partition's error code and the values read."""
        answer = self.ask(1, 12, {
            "replica_id": replica_id, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
        part = answer.responses[0].partitions[0]
        values = [bytes(r.value or b"") for _h, batch in iter_batches(part.records or b"") for r in batch]
        return int(part.error_code), values

    def list_offsets(self, topic: str) -> int:
        answer = self.ask(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        return int(answer.topics[0].partitions[0].error_code)

    def init_producer_id(self) -> Any:
        return self.ask(22, 4, {"transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
                                "producer_epoch": -1})

    def describe_configs(self, *topics: str) -> dict[str, int]:
        answer = self.ask(32, 4, {"resources": [{"resource_type": RT_TOPIC, "resource_name": t, "configuration_keys": None}
                                                for t in topics], "include_synonyms": False, "include_documentation": False})
        return {r.resource_name: int(r.error_code) for r in answer.results}

    def describe_acls(self) -> int:
        answer = self.ask(29, 1, {"resource_type_filter": RT_ANY, "resource_name_filter": None, "pattern_type_filter": PT_ANY,
                                  "principal_filter": None, "host_filter": None, "operation": OP_ANY,
                                  "permission_type": PERM_ANY})
        return int(answer.error_code)


def eventually(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.2)


# ====================================================================== tests
def test_without_acls_only_the_super_user_is_served(s: AclBroker) -> None:
    """allow.everyone.if.no.acl.found=false and no ACL at all: alice (SASL) and ANONYMOUS
    (PLAINTEXT) may do nothing; admin, a super user, everything."""
    from confluent_kafka import KafkaError

    topic = unique("noacl-")
    create_topics(s, topic)
    assert confluent_deliver(s, "admin", topic, [b"by-admin"]) == [None]
    with Raw(s.sasl, "admin") as raw:
        assert raw.metadata()[topic] == 0
        assert raw.fetch(topic) == (0, [b"by-admin"])
        assert raw.describe_acls() == 0

    # alice's producer: every record fails with TOPIC_AUTHORIZATION_FAILED.
    reports = confluent_deliver(s, "alice", topic, [b"by-alice"])
    assert reports[0] is not None and reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, reports
    assert admin_client(s, "alice").list_topics(timeout=15).topics == {}
    for raw in (Raw(s.sasl, "alice"), Raw(s.plaintext)):
        with raw:
            assert raw.metadata() == {}, "unauthorized topics must be left out of the all-topics list"
            assert raw.metadata([topic]) == {topic: TOPIC_AUTHORIZATION_FAILED}
            assert raw.produce(topic) == TOPIC_AUTHORIZATION_FAILED
            assert raw.fetch(topic) == (TOPIC_AUTHORIZATION_FAILED, [])
            assert raw.list_offsets(topic) == TOPIC_AUTHORIZATION_FAILED
            assert raw.describe_acls() == CLUSTER_AUTHORIZATION_FAILED
    # Nothing alice sent was appended.
    with Raw(s.sasl, "admin") as raw:
        assert raw.fetch(topic) == (0, [b"by-admin"])
    # (librdkafka drops DescribeAcls' error code, an empty list: CreateAcls reports it.)
    binding = acl("TOPIC", topic, "User:alice", "ALL")
    refused = admin_client(s, "alice").create_acls([binding], request_timeout=15)
    assert kafka_error(refused[binding]).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert describe(s, acl_filter(principal="User:alice")) == set()


def test_literal_write_acl_allows_one_topic_and_implies_describe(s: AclBroker, grants: Grants) -> None:
    from confluent_kafka import KafkaError

    t1, t2 = unique("lit-t1-"), unique("lit-t2-")
    create_topics(s, t1, t2)
    grants.add(acl("TOPIC", t1, "User:alice", "WRITE"))

    assert confluent_deliver(s, "alice", t1, [b"a", b"b"]) == [None, None]
    reports = confluent_deliver(s, "alice", t2, [b"c"])
    assert reports[0] is not None and reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, reports
    with Raw(s.sasl, "alice") as raw:
        assert raw.produce(t1) == 0
        assert raw.produce(t2) == TOPIC_AUTHORIZATION_FAILED
        # WRITE implies DESCRIBE: t1 is listed and described, t2 is not.
        listed = raw.metadata()
        assert t1 in listed and t2 not in listed, listed
        assert raw.metadata([t1, t2]) == {t1: 0, t2: TOPIC_AUTHORIZATION_FAILED}
        assert raw.list_offsets(t1) == 0
        assert raw.list_offsets(t2) == TOPIC_AUTHORIZATION_FAILED
        # ... but not READ.
        assert raw.fetch(t1) == (TOPIC_AUTHORIZATION_FAILED, [])
    with Raw(s.sasl, "admin") as raw:
        assert raw.fetch(t1)[1] == [b"a", b"b", b"v"]
        assert raw.fetch(t2) == (0, [])
    # The grant is alice's alone.
    with Raw(s.sasl, "bob") as raw:
        assert raw.produce(t1) == TOPIC_AUTHORIZATION_FAILED


def test_prefixed_topic_read_and_group_read(s: AclBroker, grants: Grants) -> None:
    """READ on topics prefixed "orders-" and on group g-alice: alice consumes orders-eu in
    g-alice and commits; another group is refused; other topics are not readable."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    orders, private = "orders-eu", "private-eu"
    create_topics(s, orders, partitions=2)
    create_topics(s, private)
    values = [b"order-%d" % i for i in range(10)]
    assert confluent_deliver(s, "admin", orders, values) == [None] * len(values)
    assert confluent_deliver(s, "admin", private, [b"secret"]) == [None]
    grants.add(acl("TOPIC", "orders-", "User:alice", "READ", pattern="PREFIXED"),
               acl("GROUP", "g-alice", "User:alice", "READ"))

    consumer = Consumer({**settings(s, "alice"), "group.id": "g-alice", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    got: list[bytes] = []
    ends: dict[int, int] = {}  # partition -> the offset after the last record read
    try:
        consumer.subscribe([orders])
        deadline = time.monotonic() + 30
        while len(got) < len(values):
            assert time.monotonic() < deadline, f"alice read {len(got)} of {len(values)} records"
            for msg in consumer.consume(num_messages=100, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg.value() or b"")
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                ends[partition] = offset + 1
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(orders, p) for p in range(2)], timeout=15)
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)
    assert sum(ends.values()) == len(values)
    assert {tp.partition: tp.offset for tp in committed if tp.partition in ends} == ends, committed
    assert all(tp.error is None for tp in committed), committed

    # Another group: GROUP_AUTHORIZATION_FAILED, reported to the application.
    other = Consumer({**settings(s, "alice"), "group.id": "g-other", "auto.offset.reset": "earliest",
                      "session.timeout.ms": 6000})
    errors: list[Any] = []
    try:
        other.subscribe([orders])
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            for msg in other.consume(num_messages=10, timeout=0.5):
                if msg.error() is not None:
                    errors.append(msg.error())
                else:
                    raise AssertionError(f"g-other read a record: {msg.value()!r}")
    finally:
        other.close()
    assert errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, errors

    with Raw(s.sasl, "alice") as raw:
        assert int(raw.ask(10, 3, {"key": "g-other", "key_type": 0}).error_code) == GROUP_AUTHORIZATION_FAILED
        assert int(raw.ask(10, 3, {"key": "g-alice", "key_type": 0}).error_code) == 0  # READ implies DESCRIBE
        join = raw.ask(11, 5, {"group_id": "g-other", "session_timeout": 10_000, "rebalance_timeout": 10_000,
                               "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": b""}]})
        assert int(join.error_code) == GROUP_AUTHORIZATION_FAILED
        # Only orders-* is readable (and listed); READ is not WRITE.
        assert raw.fetch(orders)[0] == 0
        assert raw.fetch(private) == (TOPIC_AUTHORIZATION_FAILED, [])
        assert raw.produce(orders) == TOPIC_AUTHORIZATION_FAILED
        listed = raw.metadata()
        assert orders in listed and private not in listed, listed
        # A commit of g-alice for a topic she may not READ: refused for that topic.
        commit = raw.ask(8, 7, {"group_id": "g-alice", "generation_id_or_member_epoch": -1, "member_id": "",
                                "group_instance_id": None, "topics": [{"name": private, "partitions": [
                                    {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                     "committed_metadata": None}]}]})
        assert int(commit.topics[0].partitions[0].error_code) == TOPIC_AUTHORIZATION_FAILED


def test_deny_wins_over_allow(s: AclBroker, grants: Grants) -> None:
    """ALLOW ALL on every topic ("*") and DENY READ on topics prefixed "secret-" for bob:
    the DENY wins for READ only; a DENY bound to another host does not apply to him."""
    public, secret = unique("pub-"), unique("secret-")
    create_topics(s, public, secret)
    with Raw(s.sasl, "admin") as raw:
        assert raw.produce(public, b"open") == 0 and raw.produce(secret, b"hidden") == 0
    grants.add(acl("TOPIC", "*", "User:bob", "ALL"),
               acl("TOPIC", "secret-", "User:bob", "READ", pattern="PREFIXED", permission="DENY"),
               acl("TOPIC", public, "User:bob", "READ", host="10.9.9.9", permission="DENY"))

    with Raw(s.sasl, "bob") as raw:
        assert raw.fetch(public) == (0, [b"open"])
        assert raw.fetch(secret) == (TOPIC_AUTHORIZATION_FAILED, [])
        # Only READ is denied: bob still writes and describes secret-*.
        assert raw.produce(secret, b"from-bob") == 0
        assert raw.metadata([secret]) == {secret: 0}
        assert raw.list_offsets(secret) == 0
    # The grants are bob's: alice still gets nothing.
    with Raw(s.sasl, "alice") as raw:
        assert raw.fetch(public) == (TOPIC_AUTHORIZATION_FAILED, [])


def test_group_configs_need_describe_configs_or_alter_configs_on_the_group(s: AclBroker, grants: Grants) -> None:
    """A GROUP config resource is checked as Kafka checks it: DESCRIBE_CONFIGS / ALTER_CONFIGS
    on the group (ALTER_CONFIGS implies DESCRIBE_CONFIGS), GROUP_AUTHORIZATION_FAILED otherwise;
    READ on the group grants neither."""
    g1, g2 = unique("cfg-g1-"), unique("cfg-g2-")
    change = [{"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]

    def alter(raw: Raw, group: str) -> int:
        answer = raw.ask(44, 1, {"validate_only": False, "resources": [
            {"resource_type": RT_GROUP_CONFIG, "resource_name": group, "configs": change}]})
        return int(answer.responses[0].error_code)

    def described(raw: Raw) -> dict[str, int]:
        answer = raw.ask(32, 4, {"resources": [{"resource_type": RT_GROUP_CONFIG, "resource_name": g, "configuration_keys": None}
                                               for g in (g1, g2)], "include_synonyms": False, "include_documentation": False})
        return {r.resource_name: int(r.error_code) for r in answer.results}

    grants.add(acl("GROUP", g2, "User:alice", "READ"))
    with Raw(s.sasl, "alice") as raw:
        assert described(raw) == {g1: GROUP_AUTHORIZATION_FAILED, g2: GROUP_AUTHORIZATION_FAILED}
        assert (alter(raw, g1), alter(raw, g2)) == (GROUP_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED)
    grants.add(acl("GROUP", g1, "User:alice", "ALTER_CONFIGS"))
    with Raw(s.sasl, "alice") as raw:
        assert described(raw) == {g1: 0, g2: GROUP_AUTHORIZATION_FAILED}
        assert (alter(raw, g1), alter(raw, g2)) == (0, GROUP_AUTHORIZATION_FAILED)
    with Raw(s.sasl, "admin") as raw:  # a super user
        assert described(raw) == {g1: 0, g2: 0}


def test_alter_configs_implies_describe_configs(s: AclBroker, grants: Grants) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    t1, t2 = unique("cfg-t1-"), unique("cfg-t2-")
    create_topics(s, t1, t2)
    with Raw(s.sasl, "alice") as raw:
        assert raw.describe_configs(t1, t2) == {t1: TOPIC_AUTHORIZATION_FAILED, t2: TOPIC_AUTHORIZATION_FAILED}

    grants.add(acl("TOPIC", t1, "User:alice", "ALTER_CONFIGS"))
    with Raw(s.sasl, "alice") as raw:
        assert raw.describe_configs(t1, t2) == {t1: 0, t2: TOPIC_AUTHORIZATION_FAILED}
        # ALTER_CONFIGS is not one of the operations that imply DESCRIBE.
        assert raw.metadata([t1]) == {t1: TOPIC_AUTHORIZATION_FAILED}
    alice = admin_client(s, "alice")
    described = alice.describe_configs([ConfigResource("TOPIC", t1)], request_timeout=15)
    configs = next(iter(described.values())).result(timeout=20)
    assert configs["retention.ms"].value == "604800000"
    change = [ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)]
    futures = alice.incremental_alter_configs([ConfigResource("TOPIC", t1, incremental_configs=change)], request_timeout=15)
    next(iter(futures.values())).result(timeout=20)
    refused = alice.incremental_alter_configs([ConfigResource("TOPIC", t2, incremental_configs=change)], request_timeout=15)
    assert kafka_error(next(iter(refused.values()))).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    seen = admin_client(s).describe_configs([ConfigResource("TOPIC", t1), ConfigResource("TOPIC", t2)], request_timeout=15)
    values = {resource.name: future.result(timeout=20)["retention.ms"].value for resource, future in seen.items()}
    assert values == {t1: "3600000", t2: "604800000"}


def test_cluster_level_operations(s: AclBroker, grants: Grants) -> None:
    """CreateTopics needs CREATE (cluster or topic); ElectLeaders ALTER on the cluster; an
    idempotent producer IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    created, written = unique("cl-new-"), unique("mal-")
    refused = admin_client(s, "alice").create_topics([NewTopic(created, 1, 1)], request_timeout=15)
    assert kafka_error(refused[created]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with Raw(s.sasl, "admin") as raw:
        assert created not in raw.metadata()
    create_topics(s, written)

    with Raw(s.sasl, "mallory") as raw:
        elect = raw.ask(43, 2, {"election_type": 0, "timeout": 5000,
                                "topic_partitions": [{"topic": written, "partitions": [0]}]})
        assert int(elect.error_code) == CLUSTER_AUTHORIZATION_FAILED
        assert int(raw.init_producer_id().error_code) == CLUSTER_AUTHORIZATION_FAILED

    grants.add(acl("CLUSTER", "kafka-cluster", "User:alice", "CREATE"),
               acl("TOPIC", written, "User:mallory", "WRITE"))
    admin_client(s, "alice").create_topics([NewTopic(created, 1, 1)], request_timeout=15)[created].result(timeout=20)
    with Raw(s.sasl, "admin") as raw:
        assert raw.metadata([created]) == {created: 0}
    with Raw(s.sasl, "mallory") as raw:
        answer = raw.init_producer_id()
        assert int(answer.error_code) == 0 and answer.producer_id >= 0, answer
        # WRITE on a topic is not ALTER on the cluster.
        again = raw.ask(43, 2, {"election_type": 0, "timeout": 5000, "topic_partitions": [{"topic": written, "partitions": [0]}]})
        assert int(again.error_code) == CLUSTER_AUTHORIZATION_FAILED
    assert confluent_deliver(s, "mallory", written, [b"m1", b"m2"], **{"enable.idempotence": True}) == [None, None]
    with Raw(s.sasl, "admin") as raw:
        assert raw.fetch(written)[1] == [b"m1", b"m2"]


def test_describe_cluster_needs_no_acl(s: AclBroker) -> None:
    """Kafka authorizes nothing for DescribeCluster (AuthHelper.computeDescribeClusterResponse:
    DESCRIBE on the cluster only decides cluster_authorized_operations): a principal without
    any ACL gets the brokers, as Metadata gives them to her; ListPartitionReassignments does
    need DESCRIBE on the cluster."""
    with Raw(s.sasl, "mallory") as raw:
        answer = raw.ask(60, 0, {"include_cluster_authorized_operations": False})
        assert (int(answer.error_code), [(b.broker_id, b.host, b.port) for b in answer.brokers]) == (
            0, [(0, HOST, s.sasl_port)]), f"DescribeCluster v0 of mallory (no ACL): {answer}"
        assert answer.cluster_id
        listed = raw.ask(46, 0, {"timeout": 5000, "topics": None})
        assert int(listed.error_code) == CLUSTER_AUTHORIZATION_FAILED


def test_describe_topic_partitions_answers_only_what_the_principal_may_describe(s: AclBroker, grants: Grants) -> None:
    """DescribeTopicPartitions as Kafka's handler: a topic named without DESCRIBE is
    TOPIC_AUTHORIZATION_FAILED (existing or not, with no id), after the others; asking for
    every topic silently leaves such topics out; the authorized operations are the principal's."""
    seen, hidden = unique("dtp-seen-"), unique("dtp-hidden-")
    missing = unique("dtp-missing-")
    create_topics(s, seen, hidden, partitions=2)
    grants.add(acl("TOPIC", seen, "User:alice", "DESCRIBE"))
    with Raw(s.sasl, "alice") as raw:
        named = raw.ask(75, 0, {"topics": [{"name": t} for t in (missing, hidden, seen)],
                                "response_partition_limit": 100, "cursor": None})
        every = raw.ask(75, 0, {"topics": [], "response_partition_limit": 100, "cursor": None})
    assert [(t.name, int(t.error_code), len(t.partitions), t.topic_id) for t in named.topics] == [
        (seen, 0, 2, named.topics[0].topic_id), (hidden, TOPIC_AUTHORIZATION_FAILED, 0, None),
        (missing, TOPIC_AUTHORIZATION_FAILED, 0, None)], named
    assert named.topics[0].topic_id is not None
    assert named.topics[0].topic_authorized_operations == 1 << 8  # DESCRIBE alone
    assert named.topics[1].topic_authorized_operations == -(2**31)  # not computed for a refused topic
    assert [t.name for t in every.topics] == [seen], every


def test_update_features_needs_alter_on_the_cluster(s: AclBroker) -> None:
    """Kafka's UpdateFeatures takes ALTER on the cluster (ControllerApis.handleUpdateFeatures):
    without it, CLUSTER_AUTHORIZATION_FAILED and nothing changes; the super user may."""
    update = {"timeout": 5000, "validate_only": True, "feature_updates": [
        {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}]}
    with Raw(s.sasl, "mallory") as raw:
        refused = raw.ask(57, 1, update)
        assert (int(refused.error_code), refused.results) == (CLUSTER_AUTHORIZATION_FAILED, ()), refused
    with Raw(s.sasl, "admin") as raw:
        allowed = raw.ask(57, 1, update)
        assert int(allowed.error_code) == 0 and [r.feature for r in allowed.results] == ["transaction.version"]


def test_a_refused_elect_leaders_names_each_partition(s: AclBroker) -> None:
    """Kafka answers an unauthorized ElectLeaders with CLUSTER_AUTHORIZATION_FAILED for each
    partition asked (KafkaApis.handleElectLeaders), and v1+ at the top too; v0 has no
    top-level error code, so an answer without partitions would read as success."""
    topic = unique("elect-")
    create_topics(s, topic, partitions=2)
    with Raw(s.sasl, "mallory") as raw:
        for version in (0, 2):
            data: dict[str, Any] = {"timeout": 5000, "topic_partitions": [{"topic": topic, "partitions": [0, 1]}]}
            if version:
                data["election_type"] = 0
            answer = raw.ask(43, version, data)
            if version:
                assert int(answer.error_code) == CLUSTER_AUTHORIZATION_FAILED
            per_partition = {(r.topic, int(p.partition_id), int(p.error_code))
                             for r in answer.replica_election_results for p in r.partition_result}
            assert per_partition == {(topic, 0, CLUSTER_AUTHORIZATION_FAILED), (topic, 1, CLUSTER_AUTHORIZATION_FAILED)}, (
                f"ElectLeaders v{version} refused: {answer}")


def test_describe_and_delete_acls_filters(s: AclBroker, grants: Grants) -> None:
    """DescribeAcls and DeleteAcls through AdminClient: ANY, exact names, MATCH, principals,
    permissions; a delete removes only what its filter matches."""
    name = unique("sem-")
    carol_read = acl("TOPIC", name, "User:carol", "READ")
    carol_deny = acl("TOPIC", name, "User:carol", "WRITE", host="10.0.0.1", permission="DENY")
    dave_prefix = acl("TOPIC", name[:6], "User:dave", "DESCRIBE", pattern="PREFIXED")
    dave_wildcard = acl("TOPIC", "*", "User:dave", "DESCRIBE")
    carol_group = acl("GROUP", name, "User:carol", "READ")
    everything = [carol_read, carol_deny, dave_prefix, dave_wildcard, carol_group]
    grants.add(*everything)
    k = {b: key(b) for b in everything}

    assert {k[b] for b in everything} <= describe(s, acl_filter())
    assert describe(s, acl_filter(name=name)) == {k[carol_read], k[carol_deny], k[carol_group]}
    assert describe(s, acl_filter("TOPIC", name, "LITERAL")) == {k[carol_read], k[carol_deny]}
    assert describe(s, acl_filter("TOPIC", name, "MATCH")) == {k[carol_read], k[carol_deny], k[dave_prefix], k[dave_wildcard]}
    assert describe(s, acl_filter("TOPIC", name[:6], "PREFIXED")) == {k[dave_prefix]}
    assert describe(s, acl_filter("TOPIC", name[:6], "LITERAL")) == set()
    assert describe(s, acl_filter(principal="User:dave")) == {k[dave_prefix], k[dave_wildcard]}
    assert describe(s, acl_filter(principal="User:carol", permission="DENY")) == {k[carol_deny]}
    assert describe(s, acl_filter(principal="User:carol", host="10.0.0.1")) == {k[carol_deny]}
    assert describe(s, acl_filter("GROUP", principal="User:carol", operation="READ")) == {k[carol_group]}

    # A filter naming nothing stored removes nothing; two filters remove what each matches.
    assert delete(s, acl_filter("TOPIC", name, "LITERAL", "User:nobody")) == [set()]
    removed = delete(s, acl_filter("TOPIC", name, "LITERAL", operation="WRITE"), acl_filter("GROUP", name))
    assert removed == [{k[carol_deny]}, {k[carol_group]}]
    assert describe(s, acl_filter(name=name)) == {k[carol_read]}
    # MATCH removes every ACL that applies to the topic: its literal name, "*" and the prefix.
    assert delete(s, acl_filter("TOPIC", name, "MATCH", "User:dave")) == [{k[dave_prefix], k[dave_wildcard]}]
    assert describe(s, acl_filter(principal="User:dave")) == set()
    assert describe(s, acl_filter(principal="User:carol")) == {k[carol_read]}
    # Only admin may ask.
    from confluent_kafka import KafkaError

    future = admin_client(s, "mallory").delete_acls([acl_filter()], request_timeout=15)
    assert kafka_error(next(iter(future.values()))).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert describe(s, acl_filter(principal="User:carol")) == {k[carol_read]}


def test_a_client_claiming_to_be_a_broker_is_refused(s: AclBroker, grants: Grants) -> None:
    """Follower fetches (replica_id 0, the broker's own id) and appends to
    __consumer_offsets (client id castle-coordinator/5) need a broker's identity: ALLOW ALL
    on every topic and group does not give it; CLUSTER_ACTION on the cluster does (Kafka's rule)."""
    topic = unique("ident-")
    create_topics(s, topic)
    grants.add(acl("TOPIC", "*", "User:alice", "ALL"), acl("GROUP", "*", "User:alice", "ALL"))
    with Raw(s.sasl, "alice") as raw:
        assert int(raw.ask(10, 3, {"key": "ident-group", "key_type": 0}).error_code) == 0
    with Raw(s.sasl, "admin") as raw:  # __consumer_offsets exists once a coordinator was asked for
        eventually(lambda: "__consumer_offsets" in raw.metadata(), "__consumer_offsets to be created")

    for raw in (Raw(s.sasl, "alice", client_id="castle-coordinator/5"), Raw(s.plaintext, client_id="castle-coordinator/5")):
        with raw:
            assert raw.fetch(topic, replica_id=0)[0] == TOPIC_AUTHORIZATION_FAILED
    with Raw(s.sasl, "alice", client_id="castle-coordinator/5") as raw:
        # She may WRITE every topic, but only a broker appends to an internal one (Kafka's ReplicaManager).
        for partition in range(2):
            assert raw.produce("__consumer_offsets", b"forged", partition) == INVALID_TOPIC_EXCEPTION
    with Raw(s.sasl, "alice") as raw:
        assert raw.fetch(topic) == (0, [])  # as a consumer she reads

    # A super user, or a principal granted CLUSTER_ACTION, is a broker.
    with Raw(s.sasl, "admin") as raw:
        assert raw.fetch(topic, replica_id=0)[0] == 0
    grants.add(acl("CLUSTER", "kafka-cluster", "User:alice", "CLUSTER_ACTION"))
    with Raw(s.sasl, "alice") as raw:
        assert raw.fetch(topic, replica_id=0)[0] == 0
    with Raw(s.sasl, "bob") as raw:
        assert raw.fetch(topic, replica_id=0)[0] == TOPIC_AUTHORIZATION_FAILED


def test_cluster_action_is_authorized_for_the_clients_host(s: AclBroker, grants: Grants) -> None:
    """CLUSTER_ACTION is authorized for the client's address like any operation (Kafka's
    authorizeClusterOperation passes the request's client address): a DENY for 127.0.0.1
    beats an ALLOW for every host, and an ALLOW for 127.0.0.1 alone suffices."""
    topic = unique("ident-host-")
    create_topics(s, topic)
    grants.add(acl("CLUSTER", "kafka-cluster", "User:bob", "CLUSTER_ACTION"),
               acl("CLUSTER", "kafka-cluster", "User:bob", "CLUSTER_ACTION", host=HOST, permission="DENY"),
               acl("CLUSTER", "kafka-cluster", "User:mallory", "CLUSTER_ACTION", host=HOST))
    with Raw(s.sasl, "bob") as raw:
        denied = raw.fetch(topic, replica_id=0)[0]
    with Raw(s.sasl, "mallory") as raw:
        allowed = raw.fetch(topic, replica_id=0)[0]
    assert (denied, allowed) == (TOPIC_AUTHORIZATION_FAILED, 0), (
        "follower fetch (replica_id 0) of bob (ALLOW CLUSTER_ACTION *, DENY from 127.0.0.1) and "
        f"mallory (ALLOW CLUSTER_ACTION from 127.0.0.1): got {(denied, allowed)}")


def test_transactional_produce_and_write_txn_markers_need_their_acls(s: AclBroker, grants: Grants) -> None:
    """Kafka's checks: a Produce naming a transactional id needs WRITE on that
    TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition,
    WRITE on the topic notwithstanding); WriteTxnMarkers needs CLUSTER_ACTION on the cluster."""
    topic = unique("txn-acl-")
    transactional_id = unique("tx-")
    create_topics(s, topic)
    grants.add(acl("TOPIC", topic, "User:alice", "WRITE"))

    def transactional_produce(raw: Raw, producer_id: int, epoch: int, sequence: int) -> int:
        batch = encode_batch([Record(0, int(time.time() * 1000), b"k", b"t", ())], producer_id=producer_id,
                             producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
        answer = raw.ask(0, 9, {"transactional_id": transactional_id, "acks": -1, "timeout": 10_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        return int(answer.responses[0].partition_responses[0].error_code)

    def write_markers(raw: Raw, producer_id: int, epoch: int) -> list[int]:
        answer = raw.ask(27, 1, {"markers": [{"producer_id": producer_id, "producer_epoch": epoch,
                                              "transaction_result": False, "coordinator_epoch": 0,
                                              "topics": [{"name": topic, "partition_indexes": [0]}]}]})
        return [int(p.error_code) for m in answer.markers for t in m.topics for p in t.partitions]

    with Raw(s.sasl, "alice") as raw:
        producer = raw.init_producer_id()
        assert producer.error_code == 0
        producer_id, epoch = int(producer.producer_id), int(producer.producer_epoch)
        assert transactional_produce(raw, producer_id, epoch, 0) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert write_markers(raw, producer_id, epoch) == [CLUSTER_AUTHORIZATION_FAILED]
    grants.add(acl("TRANSACTIONAL_ID", transactional_id, "User:alice", "WRITE"),
               acl("CLUSTER", "kafka-cluster", "User:alice", "CLUSTER_ACTION"))
    with Raw(s.sasl, "alice") as raw:
        # Allowed now; the partition must also be in the producer's transaction (KIP-890:
        # the broker asks the transaction coordinator first).
        init = raw.ask(22, 4, {"transactional_id": transactional_id, "transaction_timeout": 60_000,
                               "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == 0
        producer_id, epoch = int(init.producer_id), int(init.producer_epoch)
        added = raw.ask(24, 3, {"v3_and_below_transactional_id": transactional_id,
                                "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": epoch,
                                "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        assert [int(p.partition_error_code) for t in added.results_by_topic_v3_and_below
                for p in t.results_by_partition] == [0]
        assert transactional_produce(raw, producer_id, epoch, 0) == 0
        assert write_markers(raw, producer_id, epoch) == [0]
    with Raw(s.sasl, "bob") as raw:
        assert write_markers(raw, producer_id, epoch) == [CLUSTER_AUTHORIZATION_FAILED]


def test_an_internal_topic_needs_write_first(s: AclBroker) -> None:
    """Kafka's Produce checks WRITE on every topic first, internal ones included
    (KafkaApis.handleProduceRequest): ANONYMOUS, without any ACL, claiming a coordinator's
    client id, gets TOPIC_AUTHORIZATION_FAILED for __consumer_offsets, as for any topic."""
    with Raw(s.plaintext, client_id="castle-coordinator/5") as raw:
        codes = [raw.produce("__consumer_offsets", b"forged", partition) for partition in range(2)]
    assert codes == [TOPIC_AUTHORIZATION_FAILED] * 2, f"Produce to __consumer_offsets as ANONYMOUS: {codes}"


# ---------------------------------------------------------------------- command-line tools
def castle_acls(s: AclBroker, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    online = ["--bootstrap-server", s.sasl, "--property", "security.protocol=SASL_PLAINTEXT",
              "--property", f"sasl.mechanism={MECHANISM}", "--property", f"sasl.username={user}",
              "--property", f"sasl.password={PASSWORDS[user]}", "--timeout", "20"]
    return subprocess.run(castle_command() + ["acls", *args, *online], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_castle_acls_cli_round_trip(s: AclBroker, grants: Grants) -> None:
    topic = unique("cli-")
    create_topics(s, topic)
    grants.also_remove(acl_filter("TOPIC", topic))

    done = castle_acls(s, "admin", "add", "--topic", topic, "--allow-principal", "User:alice",
                       "--operation", "Read", "--operation", "Write", "--json")
    assert done.returncode == 0, done.stderr
    added = json.loads(done.stdout)
    assert sorted(a["operation"] for a in added["added"]) == ["READ", "WRITE"] and added["failed"] == [], added

    listed = castle_acls(s, "admin", "list", "--topic", topic, "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted((r["resource_type"], r["pattern_type"], r["name"], r["principal"], r["host"], r["operation"],
                   r["permission"]) for r in json.loads(listed.stdout)) == [
        ("topic", "literal", topic, "User:alice", "*", "READ", "ALLOW"),
        ("topic", "literal", topic, "User:alice", "*", "WRITE", "ALLOW")]
    time.sleep(ACL_SETTLE)
    with Raw(s.sasl, "alice") as raw:
        assert raw.produce(topic, b"cli") == 0
        assert raw.fetch(topic) == (0, [b"cli"])

    # alice may not change ACLs.
    refused = castle_acls(s, "alice", "add", "--topic", topic, "--allow-principal", "User:bob")
    assert refused.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, refused

    done = castle_acls(s, "admin", "remove", "--topic", topic, "--allow-principal", "User:alice", "--operation", "Write",
                       "--json")
    assert done.returncode == 0, done.stderr
    assert [(r["name"], r["operation"]) for r in json.loads(done.stdout)["removed"]] == [(topic, "WRITE")]
    assert describe(s, acl_filter("TOPIC", topic)) == {("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW")}
    time.sleep(ACL_SETTLE)
    with Raw(s.sasl, "alice") as raw:
        assert raw.produce(topic) == TOPIC_AUTHORIZATION_FAILED
        assert raw.fetch(topic) == (0, [b"cli"])


@pytest.mark.kafka_cli
@pytest.mark.timeout(300)
def test_kafka_acls_tool(s: AclBroker, grants: Grants, tmp_path: Any) -> None:
    """Apache Kafka 4.0's kafka-acls.sh (org.apache.kafka.tools.AclCommand) over SASL as admin."""
    from tests.kafka_cli import missing_tools, run_tool

    missing = missing_tools()
    if missing:
        pytest.skip(f"Kafka's CLI needs {', '.join(missing)} on PATH")
    topic = "k1"
    grants.also_remove(acl_filter("TOPIC", topic))
    properties = tmp_path / "admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\n"
                          f"sasl.mechanism={MECHANISM}\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                          f"username=\"admin\" password=\"{PASSWORDS['admin']}\";\n")
    common = ["--bootstrap-server", s.sasl, "--command-config", str(properties)]
    entry = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"

    def acl_command(*args: str) -> str:
        done = run_tool("org.apache.kafka.tools.AclCommand", [*common, *args])
        assert done.returncode == 0, f"AclCommand {' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    out = acl_command("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    assert f"Adding ACLs for resource `{pattern}`" in out and entry in out, out
    assert describe(s, acl_filter("TOPIC", topic)) == {("TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW")}
    out = acl_command("--list", "--topic", topic)
    assert f"Current ACLs for resource `{pattern}`" in out and entry in out, out
    out = acl_command("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    assert describe(s, acl_filter("TOPIC", topic)) == set(), out


# ---------------------------------------------------------------------- persistence and no authorizer
def test_acls_survive_a_restart(s: AclBroker, grants: Grants) -> None:
    topic = unique("keep-")
    create_topics(s, topic)
    grants.add(acl("TOPIC", topic, "User:alice", "WRITE"), acl("TOPIC", "keep-", "User:alice", "READ", pattern="PREFIXED"))
    with open(os.path.join(s.broker.log_dir, "acls.json"), "rb") as handle:
        stored = json.load(handle)["acls"]
    assert {(a["name"], a["patternType"], a["principal"], a["operation"], a["permissionType"]) for a in stored
            if a["name"] in (topic, "keep-")} == {(topic, "LITERAL", "User:alice", "Write", "Allow"),
                                                   ("keep-", "PREFIXED", "User:alice", "Read", "Allow")}, stored

    s.broker.restart()
    assert describe(s, acl_filter(principal="User:alice")) == {
        ("TOPIC", topic, "LITERAL", "User:alice", "*", "WRITE", "ALLOW"),
        ("TOPIC", "keep-", "PREFIXED", "User:alice", "*", "READ", "ALLOW")}
    for _ in range(4):  # fresh connections: both workers enforce them
        with Raw(s.sasl, "alice") as raw:
            assert raw.produce(topic, b"after") == 0
            assert raw.fetch(topic)[0] == 0
            assert raw.list_offsets(topic) == 0
        with Raw(s.sasl, "bob") as raw:
            assert raw.produce(topic) == TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("broker", [{"workers": 1}], indirect=True)
def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker: Broker) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    with Raw(broker.bootstrap) as raw:
        assert raw.describe_acls() == SECURITY_DISABLED
        created = raw.ask(30, 1, {"creations": [{"resource_type": RT_TOPIC, "resource_name": "t", "resource_pattern_type": PT_LITERAL,
                                                 "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]})
        assert [int(r.error_code) for r in created.results] == [SECURITY_DISABLED]
        deleted = raw.ask(31, 1, {"filters": [{"resource_type_filter": RT_ANY, "resource_name_filter": None,
                                               "pattern_type_filter": PT_ANY, "principal_filter": None, "host_filter": None,
                                               "operation": OP_ANY, "permission_type": PERM_ANY}]})
        assert [int(r.error_code) for r in deleted.filter_results] == [SECURITY_DISABLED]
        # Everything else is allowed to everyone.
        assert raw.metadata() is not None
    # Through AdminClient (librdkafka drops DescribeAcls' error code, but not CreateAcls' and DeleteAcls').
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = acl("TOPIC", "t", "User:alice", "READ")
    assert kafka_error(admin.create_acls([binding], request_timeout=15)[binding]).code() == KafkaError.SECURITY_DISABLED
    everything = acl_filter()
    assert kafka_error(admin.delete_acls([everything], request_timeout=15)[everything]).code() == KafkaError.SECURITY_DISABLED


def test_authorized_operations_are_reported_as_the_acls_allow(s: AclBroker, grants: Grants) -> None:
    """Metadata, DescribeCluster and DescribeGroups fill in what the principal may do when the
    client asks (Kafka's AuthHelper.authorizedOperations): WRITE implies DESCRIBE, READ on a
    group implies DESCRIBE, and the super user may do everything the resource supports."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    topic, group = unique("ops-"), unique("ops-g-")
    create_topics(s, topic)
    grants.add(acl("TOPIC", topic, "User:alice", "WRITE"), acl("GROUP", group, "User:alice", "READ"))

    def topic_operations(user: str) -> set[Any]:
        futures = admin_client(s, user).describe_topics(TopicCollection([topic]), include_authorized_operations=True)
        return set(futures[topic].result(timeout=20).authorized_operations)

    assert topic_operations("alice") == {AclOperation.WRITE, AclOperation.DESCRIBE}
    assert AclOperation.ALTER_CONFIGS in topic_operations("admin") and AclOperation.READ in topic_operations("admin")
    alice = admin_client(s, "alice")
    assert set(alice.describe_cluster(include_authorized_operations=True).result(timeout=20).authorized_operations
               or []) == set()
    admin_cluster = admin_client(s).describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert AclOperation.CLUSTER_ACTION in set(admin_cluster.authorized_operations)
    described = alice.describe_consumer_groups([group], include_authorized_operations=True)[group].result(timeout=20)
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}


def test_share_group_apis_need_their_acls(s: AclBroker, grants: Grants) -> None:
    """ShareGroupHeartbeat needs READ on the group and DESCRIBE on the subscribed topics;
    ShareGroupDescribe DESCRIBE on the group and on the topics its members are assigned;
    DeleteShareGroupOffsets DELETE on the group (Kafka's KafkaApis checks)."""
    topic, group = "share-acl", "share-acl-group"
    create_topics(s, topic)
    member = str(uuid.uuid4())
    join = {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": [topic]}
    with Raw(s.sasl, "alice") as raw:
        assert int(raw.ask(76, 1, join).error_code) == GROUP_AUTHORIZATION_FAILED
        described = raw.ask(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
        assert int(described.error_code) == GROUP_AUTHORIZATION_FAILED
    grants.add(acl("GROUP", group, "User:alice", "READ"))
    with Raw(s.sasl, "alice") as raw:
        assert int(raw.ask(76, 1, join).error_code) == TOPIC_AUTHORIZATION_FAILED
    grants.add(acl("TOPIC", topic, "User:alice", "DESCRIBE"))
    with Raw(s.sasl, "alice") as raw:
        joined = raw.ask(76, 1, join)
        assert (int(joined.error_code), joined.member_epoch) == (0, 1)
        deadline = time.monotonic() + 20
        while True:  # the partition is assigned once its share state is initialized
            beat = raw.ask(76, 1, {**join, "member_epoch": int(joined.member_epoch)})
            assert int(beat.error_code) == 0, beat
            if beat.assignment is not None and beat.assignment.topic_partitions:
                break
            assert time.monotonic() < deadline, "no assignment"
            time.sleep(0.2)
        described = raw.ask(77, 1, {"group_ids": [group], "include_authorized_operations": True}).groups[0]
        assert (int(described.error_code), [m.member_id for m in described.members]) == (0, [member])
        refused = raw.ask(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        assert int(refused.error_code) == GROUP_AUTHORIZATION_FAILED
        raw.ask(76, 1, {**join, "member_epoch": -1, "subscribed_topic_names": None})
    with Raw(s.sasl, "bob") as raw:
        assert int(raw.ask(76, 1, {**join, "member_id": str(uuid.uuid4())}).error_code) == GROUP_AUTHORIZATION_FAILED


def test_log_dirs_and_config_resource_listing_need_their_cluster_acls(s: AclBroker, grants: Grants) -> None:
    """Kafka's KafkaApis: DescribeLogDirs takes DESCRIBE on the cluster (else the whole request
    is CLUSTER_AUTHORIZATION_FAILED), AlterReplicaLogDirs ALTER (else each partition is),
    ListConfigResources DESCRIBE_CONFIGS; granted, each is served."""
    topic = unique("logdirs-acl-")
    create_topics(s, topic)
    move = {"dirs": [{"path": "/nowhere", "topics": [{"name": topic, "partitions": [0]}]}]}
    with Raw(s.sasl, "mallory") as raw:
        described = raw.ask(35, 4, {"topics": None})
        assert (int(described.error_code), described.results) == (CLUSTER_AUTHORIZATION_FAILED, ()), described
        moved = raw.ask(34, 2, move)
        assert [(t.topic_name, [(p.partition_index, int(p.error_code)) for p in t.partitions]) for t in moved.results] == [
            (topic, [(0, CLUSTER_AUTHORIZATION_FAILED)])], moved
        listed = raw.ask(74, 1, {"resource_types": []})
        assert (int(listed.error_code), listed.config_resources) == (CLUSTER_AUTHORIZATION_FAILED, ()), listed
    grants.add(acl("CLUSTER", "kafka-cluster", "User:alice", "DESCRIBE"))
    grants.add(acl("CLUSTER", "kafka-cluster", "User:alice", "DESCRIBE_CONFIGS"))
    with Raw(s.sasl, "alice") as raw:
        described = eventually(lambda: (answer := raw.ask(35, 4, {"topics": None})).error_code == 0 and answer,
                               "alice's DESCRIBE on the cluster")
        assert any(t.name == topic for result in described.results for t in result.topics), described
        listed = raw.ask(74, 1, {"resource_types": [2]})
        assert int(listed.error_code) == 0 and topic in {r.resource_name for r in listed.config_resources}
        moved = raw.ask(34, 2, move)  # DESCRIBE is not ALTER
        assert int(moved.results[0].partitions[0].error_code) == CLUSTER_AUTHORIZATION_FAILED
