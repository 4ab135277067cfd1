"""``castle transactions list|describe|describe-producers|abort|find-hanging`` (like
kafka-transactions.sh, with its columns).

These go over broker/admin/wire.py (Castle's own Kafka client: confluent-kafka has none of
these APIs), asking each broker what Kafka's Java Admin asks it:

* ``list``: ListTransactions to every broker (each lists the ids it coordinates).
* ``describe``: FindCoordinator for the id, then DescribeTransactions there.
* ``describe-producers``: DescribeProducers to the partition's leader (or ``--broker-id``).
* ``abort``: the producer whose open transaction starts at ``--start-offset`` (from
  DescribeProducers), then WriteTxnMarkers ABORT to the leader with its producer id and epoch
  and its last coordinator epoch there (0 when it has none). Brokers take markers only from
  brokers or, under an authorizer, from a principal with CLUSTER_ACTION on the cluster.
* ``find-hanging``: Kafka's search. Among the partitions asked (a topic, a partition, or
  every partition a broker holds), an open transaction whose last write is older than
  ``--max-transaction-timeout`` minutes hangs when no coordinator lists its producer id,
  when its id is unknown to its coordinator, or when the coordinator's description of the
  id does not name that partition (the coordinator will never write its marker there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session, Unreachable, UsageError
from broker.admin.wire import AdminWire, Node, PartitionInfo
from broker.protocol.describe_transactions_v0 import DescribeTransactionsResponse
from broker.protocol.errors import ErrorCode

DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, WRITE_TXN_MARKERS = 61, 65, 66, 27
MAX_BATCH = 500  # partitions per DescribeProducers, as Kafka's tool

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions")
PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------- list
def list_transactions(session: Session, duration_ms: int | None = None, pattern: str | None = None,
                      states: Sequence[str] = (), producer_ids: Sequence[int] = ()) -> Report:
    # The oldest version that carries the filters asked, so older brokers answer too.
    version = 2 if pattern else 1 if duration_ms is not None else 0
    fields = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
              "duration_filter": -1 if duration_ms is None else duration_ms, "transactional_id_pattern": pattern}
    rows: list[dict[str, Any]] = []
    unknown: set[str] = set()
    failures = []
    with AdminWire(session) as wire:
        for node_id, node in sorted(wire.brokers().items()):
            try:
                code, answer = wire.until_settled(lambda: _listed(wire, node, version, fields))
            except Unreachable:
                raise
            except AdminError as exc:
                failures.append(f"broker {node_id}: {exc}")
                continue
            if code:
                failures.append(f"broker {node_id}: listing transactions failed ({_name(code)})")
                continue
            unknown.update(answer.unknown_state_filters)
            rows += [{"transactional_id": t.transactional_id, "coordinator": node_id, "producer_id": int(t.producer_id),
                      "state": t.transaction_state} for t in answer.transaction_states]
    rows.sort(key=lambda r: (r["transactional_id"], r["coordinator"]))
    notes = [f"unknown transaction states: {', '.join(sorted(unknown))}"] if unknown else []
    text = table(LIST_HEADERS, [(r["transactional_id"], r["coordinator"], r["producer_id"], r["state"]) for r in rows])
    return Report({"transactions": rows, "unknown_state_filters": sorted(unknown)}, text, failures, notes)


def _listed(wire: AdminWire, node: Node, version: int, fields: dict[str, Any]) -> tuple[int, Any]:
    answer = wire.call(node, LIST_TRANSACTIONS, version, fields)
    return int(answer.error_code), answer


# ---------------------------------------------------------------------- describe
@dataclass(frozen=True)
class Description:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int  # -1: no transaction started
    partitions: tuple[tuple[str, int], ...]


def _describe_at(wire: AdminWire, transactional_id: str) -> tuple[int, Description | None]:
    code, node = wire.transaction_coordinator(transactional_id)
    if node is None:
        return code, None
    answer = wire.call(node, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]},
                       answer_class=DescribeTransactionsResponse)
    (state,) = answer.transaction_states
    if state.error_code:
        return int(state.error_code), None
    partitions = tuple(sorted((t.topic, int(p)) for t in state.topics for p in t.partitions))
    return 0, Description(node.node_id, transactional_id, int(state.producer_id), int(state.producer_epoch),
                          state.transaction_state, int(state.transaction_timeout.total_seconds() * 1000),
                          int(state.transaction_start_time), partitions)


def describe_one(wire: AdminWire, transactional_id: str) -> Description | None:
    """The coordinator's description; None when it knows no such id; AdminError otherwise."""
    code, description = wire.until_settled(lambda: _describe_at(wire, transactional_id))
    if code == ErrorCode.transactional_id_not_found:
        return None
    if code:
        raise AdminError(f"transactional id '{transactional_id}': {_name(code)}", code)
    return description


def describe(session: Session, transactional_id: str) -> Report:
    with AdminWire(session) as wire:
        found = describe_one(wire, transactional_id)
    if found is None:
        raise AdminError(f"transactional id '{transactional_id}' does not exist (TRANSACTIONAL_ID_NOT_FOUND)",
                         int(ErrorCode.transactional_id_not_found))
    started = found.start_ms if found.start_ms >= 0 else None
    duration = _now_ms() - found.start_ms if started is not None else None
    data = {"coordinator": found.coordinator, "transactional_id": transactional_id, "producer_id": found.producer_id,
            "producer_epoch": found.producer_epoch, "state": found.state, "timeout_ms": found.timeout_ms,
            "start_ms": started, "duration_ms": duration,
            "partitions": [{"topic": t, "partition": p} for t, p in found.partitions]}
    row = (found.coordinator, transactional_id, found.producer_id, found.producer_epoch, found.state, found.timeout_ms,
           started, duration, [f"{t}-{p}" for t, p in found.partitions])
    return Report(data, table(DESCRIBE_HEADERS, [row]))


# ---------------------------------------------------------------------- describe-producers
@dataclass(frozen=True)
class Producer:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: no marker yet
    txn_start_offset: int  # -1: no open transaction

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "last_sequence": self.last_sequence,
                "last_timestamp": self.last_timestamp,
                "coordinator_epoch": self.coordinator_epoch if self.coordinator_epoch >= 0 else None,
                "current_transaction_start_offset": self.txn_start_offset if self.txn_start_offset >= 0 else None}


def producers_on(wire: AdminWire, node: Node, tps: Sequence[tuple[str, int]]
                 ) -> tuple[dict[tuple[str, int], list[Producer]], dict[tuple[str, int], str]]:
    """DescribeProducers for ``tps`` on one broker: the producers of each partition, and the
    error of each that failed."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    answer = wire.call(node, DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": topic, "partition_indexes": partitions} for topic, partitions in by_topic.items()]})
    found: dict[tuple[str, int], list[Producer]] = {}
    errors: dict[tuple[str, int], str] = {}
    for topic in answer.topics:
        for p in topic.partitions:
            key = (topic.name, int(p.partition_index))
            if p.error_code:
                errors[key] = _name(int(p.error_code)) + (f": {p.error_message}" if p.error_message else "")
                continue
            found[key] = [Producer(topic.name, key[1], int(s.producer_id), int(s.producer_epoch), int(s.last_sequence),
                                   int(s.last_timestamp), int(s.coordinator_epoch), int(s.current_txn_start_offset))
                          for s in p.active_producers]
    return found, errors


def _producers_of(wire: AdminWire, topic: str, partition: int, broker_id: int | None) -> list[Producer]:
    node = wire.broker(broker_id) if broker_id is not None else wire.leader(topic, partition)
    found, errors = producers_on(wire, node, [(topic, partition)])
    if (topic, partition) in errors:
        where = f"broker {broker_id}" if broker_id is not None else "its leader"
        raise AdminError(f"{topic}-{partition} on {where}: {errors[(topic, partition)]}")
    return found.get((topic, partition), [])


def describe_producers(session: Session, topic: str, partition: int, broker_id: int | None = None) -> Report:
    with AdminWire(session) as wire:
        states = _producers_of(wire, topic, partition, broker_id)
    rows = [(s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence, s.last_timestamp,
             s.txn_start_offset if s.txn_start_offset >= 0 else None) for s in states]
    return Report({"producers": [s.as_dict() for s in states]}, table(PRODUCER_HEADERS, rows))


# ---------------------------------------------------------------------- abort
def abort(session: Session, topic: str, partition: int, start_offset: int | None, producer_id: int | None,
          producer_epoch: int | None, coordinator_epoch: int | None) -> Report:
    if start_offset is None and producer_id is None:
        raise UsageError("the transaction to abort is named by --start-offset, or by --producer-id, "
                         "--producer-epoch and --coordinator-epoch")
    with AdminWire(session) as wire:
        if start_offset is not None:
            matching = [s for s in _producers_of(wire, topic, partition, None) if s.txn_start_offset == start_offset]
            if not matching:
                raise AdminError(f"no open transaction starts at offset {start_offset} on {topic}-{partition}")
            producer_id, producer_epoch = matching[0].producer_id, matching[0].producer_epoch
            coordinator_epoch = matching[0].coordinator_epoch
        elif producer_epoch is None or coordinator_epoch is None:
            raise UsageError("--producer-id needs --producer-epoch and --coordinator-epoch")
        assert producer_id is not None and producer_epoch is not None and coordinator_epoch is not None
        # A transaction that hangs before any marker reached this partition has no
        # coordinator epoch here (-1): 0 is never above the one the partition checks against.
        coordinator_epoch = max(coordinator_epoch, 0)
        answer = wire.call(wire.leader(topic, partition), WRITE_TXN_MARKERS, 1, {"markers": [
            {"producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
             "coordinator_epoch": coordinator_epoch, "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
    codes = [int(p.error_code) for m in answer.markers for t in m.topics for p in t.partitions]
    if codes != [0]:
        code = next((c for c in codes if c), int(ErrorCode.unknown_server_error))
        raise AdminError(f"aborting producer {producer_id}'s transaction on {topic}-{partition}: {_name(code)}", code)
    data = {"topic": topic, "partition": partition, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "coordinator_epoch": coordinator_epoch}
    return Report(data, f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) "
                        f"on {topic}-{partition}.")


# ---------------------------------------------------------------------- find-hanging
def _partitions_to_search(wire: AdminWire, topic: str | None, partition: int | None,
                          broker_id: int | None) -> list[tuple[tuple[str, int], PartitionInfo | None]]:
    if topic is not None and partition is not None:
        return [((topic, partition), None)]
    found = wire.partitions([topic] if topic is not None else None)
    return [((name, p.partition), p) for name in sorted(found) for p in found[name]
            if broker_id is None or broker_id in p.replicas]


def _open_transactions(wire: AdminWire, searched: list[tuple[tuple[str, int], PartitionInfo | None]],
                       broker_id: int | None, max_timeout_ms: int) -> tuple[list[Producer], list[str]]:
    """Every open transaction older than ``max_timeout_ms`` among ``searched``, asked of
    ``broker_id`` or of each partition's leader, in batches; and the failures."""
    by_node: dict[int, list[tuple[str, int]]] = {}
    failures = []
    for tp, info in searched:
        if broker_id is not None:
            by_node.setdefault(broker_id, []).append(tp)
            continue
        leader = info.leader if info is not None else wire.leader(*tp).node_id
        if leader < 0:
            failures.append(f"{tp[0]}-{tp[1]}: no leader")
        else:
            by_node.setdefault(leader, []).append(tp)
    now = _now_ms()
    candidates = []
    for node_id, tps in sorted(by_node.items()):
        node = wire.broker(node_id)
        for start in range(0, len(tps), MAX_BATCH):
            found, errors = producers_on(wire, node, tps[start:start + MAX_BATCH])
            failures += [f"{t}-{p} on broker {node_id}: {why}" for (t, p), why in sorted(errors.items())]
            candidates += [s for states in found.values() for s in states
                           if s.txn_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms]
    return candidates, failures


def _transactional_ids(wire: AdminWire, producer_ids: set[int]) -> dict[int, str]:
    """Producer id -> transactional id, from every coordinator's ListTransactions."""
    ids: dict[int, str] = {}
    for node in wire.brokers().values():
        code, answer = wire.until_settled(lambda: _listed(wire, node, 0, {
            "state_filters": [], "producer_id_filters": sorted(producer_ids)}))
        if code:
            raise AdminError(f"listing the transactions of {len(producer_ids)} producers on broker {node.node_id}: "
                             f"{_name(code)}", code)
        ids.update({int(t.producer_id): t.transactional_id for t in answer.transaction_states
                    if int(t.producer_id) in producer_ids})
    return ids


def hanging_transactions(wire: AdminWire, open_txns: list[Producer]) -> list[Producer]:
    """Those of ``open_txns`` no coordinator will ever end."""
    if not open_txns:
        return []
    ids = _transactional_ids(wire, {s.producer_id for s in open_txns})
    descriptions = {tid: describe_one(wire, tid) for tid in sorted(set(ids.values()))}
    hanging = []
    for state in open_txns:
        tid = ids.get(state.producer_id)
        description = descriptions.get(tid) if tid is not None else None
        if description is None or (state.topic, state.partition) not in description.partitions:
            hanging.append(state)
    return hanging


def find_hanging(session: Session, broker_id: int | None, topic: str | None, partition: int | None,
                 max_timeout_minutes: int) -> Report:
    if topic is None and broker_id is None:
        raise UsageError("find-hanging needs --topic or --broker-id to limit the search")
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic")
    with AdminWire(session) as wire:
        if broker_id is not None:
            wire.broker(broker_id)
        searched = _partitions_to_search(wire, topic, partition, broker_id)
        open_txns, failures = _open_transactions(wire, searched, broker_id, max_timeout_minutes * 60_000)
        hanging = hanging_transactions(wire, open_txns)
    now = _now_ms()
    rows = [(s.topic, s.partition, s.producer_id, s.producer_epoch, s.coordinator_epoch, s.txn_start_offset,
             s.last_timestamp, (now - s.last_timestamp) // 60_000) for s in hanging]
    return Report({"hanging": [dict(s.as_dict(), duration_minutes=row[-1]) for s, row in zip(hanging, rows)]},
                  table(HANGING_HEADERS, rows), failures)
