"""``castle transactions`` and Apache Kafka 4.4's kafka-transactions.sh
(org.apache.kafka.tools.TransactionsCommand) against a real broker running Kafka's
authorizer (test_acls' broker: ``super.users=User:admin``, SCRAM users on SASL_PLAINTEXT).

Each test makes its own transactions with raw requests as admin, on a topic of its own:

* a *ghost*: an idempotent producer's transactional batch on partition 0; no coordinator
  ever heard of its producer id, so nothing will end it (hanging);
* a *stranded* one: a transactional producer adds only partition 0 to its transaction
  but also writes to partition 1, then aborts; the coordinator's markers reach partition 0
  only, and partition 1 stays open (hanging: the coordinator's description of the id no
  longer names it);
* a *live* one: an Ongoing transaction on partition 0 that its coordinator knows (not
  hanging).

Then the tools list and describe them, describe the partitions' producers, find the two
hanging ones, and abort them: as admin (a super user) the markers are written; as alice,
who may read the topic but has no CLUSTER_ACTION, WriteTxnMarkers is refused with
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

from broker.protocol import codec
from broker.protocol.describe_transactions_v0 import DescribeTransactionsResponse
from storage.records import Record, encode_batch
from tests.integration.broker import test_acls as acls
from tests.integration.broker.test_acls import (
    MECHANISM,
    PASSWORDS,
    AclBroker,
    Grants,
    Raw,
    acl,
    create_topics,
    request,
    unique,
)
from tests.integration.conftest import castle_command, wait_until
from tests.integration.kio_client import read_frame

pytestmark = [pytest.mark.integration, pytest.mark.transactions, pytest.mark.security, pytest.mark.timeout(240)]

OLD = 1_600_000_000_000  # the records' timestamps: long before any --max-transaction-timeout
CLUSTER_AUTHORIZATION_FAILED = 31


@dataclass
class Scene:
    topic: str
    ghost: int  # producer id
    stranded_id: str
    stranded: tuple[int, int]  # producer id, epoch
    stranded_offset: int  # where its open transaction starts on partition 1
    live_id: str
    live: tuple[int, int]


def _produce(raw: Raw, topic: str, partition: int, producer: tuple[int, int], sequence: int,
             transactional_id: str) -> int:
    batch = encode_batch([Record(0, OLD, b"k", b"v"), Record(1, OLD + 1, b"k", b"w")], producer_id=producer[0],
                         producer_epoch=producer[1], base_sequence=sequence, is_transactional=True)
    answer = raw.ask(0, 9, {"transactional_id": transactional_id, "acks": -1, "timeout": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return int(part.base_offset)


def _init(raw: Raw, transactional_id: str | None) -> tuple[int, int]:
    def attempt() -> Any:
        answer = raw.ask(22, 4, {"transactional_id": transactional_id, "transaction_timeout": 600_000,
                                 "producer_id": -1, "producer_epoch": -1})
        return answer if answer.error_code in (0,) else None

    answer = wait_until(attempt, 30, f"InitProducerId {transactional_id}")
    return int(answer.producer_id), int(answer.producer_epoch)


def _add(raw: Raw, transactional_id: str, producer: tuple[int, int], topic: str, partitions: list[int]) -> None:
    answer = raw.ask(24, 3, {"v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": producer[0],
                             "v3_and_below_producer_epoch": producer[1], "transactions": (),
                             "v3_and_below_topics": [{"name": topic, "partitions": partitions}]})
    assert [p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition] \
        == [0] * len(partitions)


def make_scene(s: AclBroker) -> Scene:
    topic = unique("txn-tools-")
    stranded_id, live_id = unique("stranded-"), unique("live-")
    create_topics(s, topic, partitions=2)
    with Raw(s.sasl, "admin") as raw:
        ghost = _init(raw, None)
        _produce(raw, topic, 0, ghost, 0, unique("ghost-"))

        stranded = _init(raw, stranded_id)
        _add(raw, stranded_id, stranded, topic, [0])
        _produce(raw, topic, 0, stranded, 0, stranded_id)
        offset = _produce(raw, topic, 1, stranded, 0, stranded_id)  # never added: no marker will come
        ended = raw.ask(26, 3, {"transactional_id": stranded_id, "producer_id": stranded[0],
                                "producer_epoch": stranded[1], "committed": False})
        assert ended.error_code == 0

        live = _init(raw, live_id)
        _add(raw, live_id, live, topic, [0])
        _produce(raw, topic, 0, live, 0, live_id)
        wait_until(lambda: state_of(raw, stranded_id) == "CompleteAbort", 20, "the stranded transaction's abort")
    return Scene(topic, ghost[0], stranded_id, stranded, offset, live_id, live)


def state_of(raw: Raw, transactional_id: str) -> str:
    """DescribeTransactions' state of the id (read with the entity that takes a -1 start time)."""
    correlation_id = raw.send(65, 0, request(65, 0, {"transactional_ids": [transactional_id]}))
    frame = read_frame(raw.sock)
    assert int.from_bytes(frame[:4], "big") == correlation_id
    answer, _size = codec.reader_for(DescribeTransactionsResponse)(frame, 5)
    return str(answer.transaction_states[0].transaction_state)


# test_acls' broker fixture under this module's name: a broker of its own for this module.
@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    """The ACL tests' broker, with v1 verification off: the scene's stranded transaction is a
    hanging one (a transactional write its coordinator never heard of), which verification
    exists to prevent and a broker that predates it, or runs without it, lets happen."""
    with acls.running_acl_broker(str(tmp_path_factory.mktemp("txn-tools")),
                                 **{"transaction.partition.verification.enable": "false"}) as secured:
        yield secured


@pytest.fixture
def secured(request: pytest.FixtureRequest, secured_broker: AclBroker) -> AclBroker:
    request.node._castle_brokers = [secured_broker.broker]  # its stderr goes into a failed test's report
    return secured_broker


@pytest.fixture
def granted(secured: AclBroker) -> Iterator[Grants]:
    made = Grants(secured)
    yield made
    made.remove_all()


@pytest.fixture
def scene(secured: AclBroker) -> Scene:
    return make_scene(secured)


# ---------------------------------------------------------------------- castle transactions
def castle(s: AclBroker, user: str, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    online = ["--bootstrap-server", s.sasl, "--property", "security.protocol=SASL_PLAINTEXT",
              "--property", f"sasl.mechanism={MECHANISM}", "--property", f"sasl.username={user}",
              "--property", f"sasl.password={PASSWORDS[user]}", "--timeout", "20"]
    return subprocess.run(castle_command() + ["transactions", command, *args, *online], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def json_of(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


def test_castle_transactions_lists_describes_finds_and_aborts(secured: AclBroker, scene: Scene,
                                                              granted: Grants) -> None:
    s = secured
    topic = scene.topic
    listed = {t["transactional_id"]: t for t in json_of(castle(s, "admin", "list", "--json"))["transactions"]}
    assert (listed[scene.live_id]["producer_id"], listed[scene.live_id]["state"]) == (scene.live[0], "Ongoing")
    assert listed[scene.stranded_id]["state"] == "CompleteAbort"
    assert listed[scene.live_id]["coordinator"] == listed[scene.stranded_id]["coordinator"] >= 0
    # A pattern only this test's live id matches (the module's broker keeps other tests' ids).
    only_live = json_of(castle(s, "admin", "list", "--transactional-id-pattern", scene.live_id[:-2] + "..", "--state",
                               "Ongoing", "--json"))
    assert [t["transactional_id"] for t in only_live["transactions"]] == [scene.live_id]
    text = castle(s, "admin", "list").stdout.splitlines()
    assert text[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [scene.live_id, str(listed[scene.live_id]["coordinator"]), str(scene.live[0]), "Ongoing"] in \
        [line.split() for line in text]

    live = json_of(castle(s, "admin", "describe", "--transactional-id", scene.live_id, "--json"))
    assert (live["state"], live["producer_id"], live["producer_epoch"], live["timeout_ms"], live["partitions"]) == (
        "Ongoing", scene.live[0], scene.live[1], 600_000, [{"topic": topic, "partition": 0}])
    assert live["start_ms"] > 0 and live["duration_ms"] >= 0
    lines = castle(s, "admin", "describe", "--transactional-id", scene.live_id).stdout.splitlines()
    assert lines[0].split()[:3] == ["CoordinatorId", "TransactionalId", "ProducerId"] and f"{topic}-0" in lines[1]
    missing = castle(s, "admin", "describe", "--transactional-id", "no-such-id")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr, missing

    producers = json_of(castle(s, "admin", "describe-producers", "--topic", topic, "--partition", "1", "--json"))
    assert [(p["producer_id"], p["producer_epoch"], p["current_transaction_start_offset"], p["coordinator_epoch"])
            for p in producers["producers"]] == [(scene.stranded[0], scene.stranded[1], scene.stranded_offset, None)]
    lines = castle(s, "admin", "describe-producers", "--topic", topic, "--partition", "0").stdout.splitlines()
    assert lines[0].split() == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                "LastTimestamp", "CurrentTransactionStartOffset"]
    assert len(lines) == 4, "the ghost, the stranded producer (its abort marker) and the live one"

    def hanging() -> list[tuple[int, int, int]]:
        found = json_of(castle(s, "admin", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0", "--json"))
        return sorted((h["partition"], h["producer_id"], h["current_transaction_start_offset"]) for h in found["hanging"])

    assert hanging() == [(0, scene.ghost, 0), (1, scene.stranded[0], scene.stranded_offset)]
    # The default timeout (15 minutes) finds them too: their last writes carry 2020's timestamps.
    text = castle(s, "admin", "find-hanging", "--topic", topic).stdout.splitlines()
    assert text[0].split() == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                               "LastTimestamp", "Duration(min)"]
    assert sorted(line.split()[:6] for line in text[1:]) == [
        [topic, "0", str(scene.ghost), "0", "-1", "0"],
        [topic, "1", str(scene.stranded[0]), str(scene.stranded[1]), "-1", str(scene.stranded_offset)]]
    usage = castle(s, "admin", "find-hanging")
    assert usage.returncode == 2 and "--topic or --broker-id" in usage.stderr

    # alice may read the topic, not write markers: refused by the broker.
    granted.add(acl("TOPIC", topic, "User:alice", "READ"))
    refused = castle(s, "alice", "abort", "--topic", topic, "--partition", "1", "--start-offset",
                     str(scene.stranded_offset))
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, refused
    assert hanging() == [(0, scene.ghost, 0), (1, scene.stranded[0], scene.stranded_offset)]

    done = json_of(castle(s, "admin", "abort", "--topic", topic, "--partition", "1", "--start-offset",
                          str(scene.stranded_offset), "--json"))
    assert (done["producer_id"], done["producer_epoch"], done["coordinator_epoch"]) == (
        scene.stranded[0], scene.stranded[1], 0)
    assert hanging() == [(0, scene.ghost, 0)]
    by_id = castle(s, "admin", "abort", "--topic", topic, "--partition", "0", "--producer-id", str(scene.ghost),
                   "--producer-epoch", "0", "--coordinator-epoch", "-1")
    assert by_id.returncode == 0 and f"producer {scene.ghost}" in by_id.stdout, by_id
    assert hanging() == []
    gone = castle(s, "admin", "abort", "--topic", topic, "--partition", "1", "--start-offset",
                  str(scene.stranded_offset))
    assert gone.returncode == 1 and "no open transaction starts at offset" in gone.stderr


# ---------------------------------------------------------------------- Kafka's kafka-transactions.sh
@pytest.mark.kafka_cli
@pytest.mark.timeout(400)
def test_kafka_transactions_tool(secured: AclBroker, scene: Scene, granted: Grants, tmp_path: Any) -> None:
    """Apache Kafka 4.4's TransactionsCommand over SASL: list (with v1's duration and v2's
    pattern filters), describe, describe-producers, find-hanging, and abort, as admin and as
    alice, against Castle's answers."""
    from tests.kafka_cli import TRANSACTIONS_COMMAND, TRANSACTIONS_VERSION, missing_tools, run_tool

    missing = missing_tools(TRANSACTIONS_VERSION)
    if missing:
        pytest.skip(f"Kafka's CLI needs {', '.join(missing)} on PATH")
    s, topic = secured, scene.topic

    def config(user: str) -> str:
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\n"
                        f"sasl.mechanism={MECHANISM}\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                        f"username=\"{user}\" password=\"{PASSWORDS[user]}\";\n")
        return str(path)

    def tool(user: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = run_tool(TRANSACTIONS_COMMAND, ["--bootstrap-server", s.sasl, "--command-config", config(user), *args],
                        version=TRANSACTIONS_VERSION)
        if ok:
            assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    def rows(done: subprocess.CompletedProcess[str]) -> list[list[str]]:
        return [line.split() for line in done.stdout.splitlines() if line.strip()]

    listed = rows(tool("admin", "list"))
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    by_id = {row[0]: row for row in listed[1:]}
    assert by_id[scene.live_id][2:] == [str(scene.live[0]), "Ongoing"]
    assert by_id[scene.stranded_id][2:] == [str(scene.stranded[0]), "CompleteAbort"]
    assert [row[0] for row in rows(tool("admin", "list", "--transactional-id-pattern", scene.live_id[:-2] + ".."))[1:]] \
        == [scene.live_id]
    assert scene.live_id not in {row[0] for row in rows(tool("admin", "list", "--duration-filter", "3600000"))[1:]}

    described = rows(tool("admin", "describe", "--transactional-id", scene.live_id))
    assert described[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                            "TopicPartitions"]
    assert described[1][1:6] == [scene.live_id, str(scene.live[0]), str(scene.live[1]), "Ongoing", "600000"]
    assert described[1][8] == f"{topic}-0"
    unknown = tool("admin", "describe", "--transactional-id", "no-such-id", ok=False)
    assert unknown.returncode == 1 and "the ID could not be found" in unknown.stderr, unknown  # TRANSACTIONAL_ID_NOT_FOUND

    producers = rows(tool("admin", "describe-producers", "--topic", topic, "--partition", "1"))
    assert producers[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                            "CurrentTransactionStartOffset"]
    assert producers[1:] == [[str(scene.stranded[0]), str(scene.stranded[1]), "-1", "1", str(OLD + 1),
                              str(scene.stranded_offset)]]

    def hanging() -> list[list[str]]:
        found = rows(tool("admin", "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"))
        assert found[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                            "LastTimestamp", "Duration(min)"]
        return sorted(row[:6] for row in found[1:])

    assert hanging() == [[topic, "0", str(scene.ghost), "0", "-1", "0"],
                         [topic, "1", str(scene.stranded[0]), str(scene.stranded[1]), "-1", str(scene.stranded_offset)]]

    granted.add(acl("TOPIC", topic, "User:alice", "READ"))
    refused = tool("alice", "abort", "--topic", topic, "--partition", "1", "--start-offset", str(scene.stranded_offset),
                   ok=False)
    # The Java Admin's words for WriteTxnMarkers' CLUSTER_AUTHORIZATION_FAILED.
    assert refused.returncode == 1 and "failed due to cluster authorization error" in refused.stderr, refused
    tool("admin", "abort", "--topic", topic, "--partition", "1", "--start-offset", str(scene.stranded_offset))
    tool("admin", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert hanging() == []


# ---------------------------------------------------------------------- Kafka's ACL checks, raw
def test_the_views_show_only_what_the_principal_may_describe(secured: AclBroker, scene: Scene,
                                                             granted: Grants) -> None:
    """KafkaApis' checks: DescribeTransactions needs DESCRIBE on the transactional id (else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and leaves out the topics the principal may not
    DESCRIBE; ListTransactions needs nothing and lists only describable ids;
    DescribeProducers needs READ on the topic (else TOPIC_AUTHORIZATION_FAILED)."""
    s, topic = secured, scene.topic

    def views(user: str) -> tuple[Any, set[str], int]:
        with Raw(s.sasl, user) as raw:
            correlation_id = raw.send(65, 0, request(65, 0, {"transactional_ids": [scene.live_id]}))
            frame = read_frame(raw.sock)
            assert int.from_bytes(frame[:4], "big") == correlation_id
            (state,) = codec.reader_for(DescribeTransactionsResponse)(frame, 5)[0].transaction_states
            listing = raw.ask(66, 0, {"state_filters": [], "producer_id_filters": []})
            assert listing.error_code == 0
            producers = raw.ask(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        return state, {t.transactional_id for t in listing.transaction_states}, \
            int(producers.topics[0].partitions[0].error_code)

    state, listed, producers_code = views("alice")
    assert state.error_code == 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert listed == set() and producers_code == 29  # TOPIC_AUTHORIZATION_FAILED

    granted.add(acl("TRANSACTIONAL_ID", scene.live_id, "User:alice", "DESCRIBE"))
    state, listed, producers_code = views("alice")
    assert (state.error_code, state.transaction_state, state.topics) == (0, "Ongoing", ()), "its topic left out"
    assert listed == {scene.live_id} and producers_code == 29

    granted.add(acl("TOPIC", topic, "User:alice", "READ"))  # READ implies DESCRIBE
    state, listed, producers_code = views("alice")
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [0])]
    assert producers_code == 0
