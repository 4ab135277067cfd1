"""The transaction coordinator's APIs as the coordinator process serves them: a request
body as a client sends it, decoded, checked as Kafka's KafkaApis checks it, answered by a
TransactionCoordinator over real logs, and the answer decoded as the client reads it."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from broker import apis
from broker.context import CoordinatorContext
from broker.coordinator.api import SERVED
from broker.coordinator.forwarded import Forwarded
from broker.protocol.build import build
from coordination.acls.model import Operation, ResourceType
from coordination.transactions.coordinator import TransactionCoordinator, TxnSettings
from tests.unit.coordination.test_coordinator_offsets import FileOffsetsLog, coordinator
from tests.unit.coordination.test_txn_coordinator import Harness

INIT, ADD_PARTITIONS, ADD_OFFSETS, END = 22, 24, 25, 26
apis.load_all()

EXISTING = {("orders", 0), ("orders", 1), ("secret", 0), ("__consumer_offsets", 0)}


def body_of(api_key: int, version: int, **fields: Any) -> bytes:
    buffer = io.BytesIO()
    cls = load_request_schema(api_key, version)
    entity_writer(cls)(buffer, build(cls, fields))
    return buffer.getvalue()


class Served:
    """A coordinator process's answers, for one principal's ACLs."""

    def __init__(self, tmp_path: Any) -> None:
        self.offsets_log = FileOffsetsLog(str(tmp_path / "offsets"))
        self.groups = coordinator(self.offsets_log)
        (tmp_path / "txn").mkdir()
        self.harness = Harness(str(tmp_path / "txn"))
        self.transactions: TransactionCoordinator = self.harness.coordinator(
            offsets_partition_for=self.groups.partition_for)
        self.denied: set[tuple[Operation, ResourceType, str]] = set()

    def ask(self, api_key: int, version: int, **fields: Any) -> Any:
        forwarded = Forwarded(api_key, version, "client-1", "/127.0.0.1", "User:alice", "CLIENT",
                              body_of(api_key, version, **fields))

        def context_for(request: Forwarded, as_version: int) -> CoordinatorContext:
            return CoordinatorContext(self.groups, request.api_key, as_version, request.client_id,
                                      request.client_host, lambda topic, partition: (topic, partition) in EXISTING,
                                      lambda op, kind, name: (op, kind, name) not in self.denied, self.transactions)

        async def answer() -> bytes:
            body = await SERVED[api_key].answer(forwarded, context_for)
            await self.transactions.settled()
            return body

        body = asyncio.run(answer())
        response, _size = entity_reader(load_response_schema(api_key, version))(body, 0)
        return response

    def init(self, version: int = 4, transactional_id: str = "tx", timeout_ms: int = 60_000) -> Any:
        fields: dict[str, Any] = {"transactional_id": transactional_id, "transaction_timeout": timeout_ms}
        if version >= 3:
            fields.update(producer_id=-1, producer_epoch=-1)
        return self.ask(INIT, version, **fields)

    def add(self, version: int, producer_id: int, epoch: int, topics: dict[str, list[int]],
            transactional_id: str = "tx") -> dict[tuple[str, int], int]:
        answer = self.ask(ADD_PARTITIONS, version, v3_and_below_transactional_id=transactional_id,
                          v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
                          v3_and_below_topics=[{"name": t, "partitions": p} for t, p in topics.items()])
        return {(t.name, r.partition_index): int(r.partition_error_code)
                for t in answer.results_by_topic_v3_and_below for r in t.results_by_partition}

    def close(self) -> None:
        self.offsets_log.close()
        self.harness.close()


def test_a_transaction_through_the_apis(tmp_path: Any) -> None:
    served = Served(tmp_path)
    try:
        init = served.init()
        assert (init.error_code, init.producer_epoch) == (0, 0) and init.producer_id >= 0
        pid = int(init.producer_id)
        assert served.add(3, pid, 0, {"orders": [0, 1]}) == {("orders", 0): 0, ("orders", 1): 0}
        offsets = served.ask(ADD_OFFSETS, 3, transactional_id="tx", producer_id=pid, producer_epoch=0, group_id="g")
        assert offsets.error_code == 0
        assert served.ask(END, 3, transactional_id="tx", producer_id=pid, producer_epoch=0, committed=True).error_code == 0
        assert served.transactions.transactions["tx"].state.wire_name == "CompleteCommit"
        partition = served.groups.partition_for("g")
        assert sorted(served.transactions.transactions["tx"].partitions) == []
        assert {tp for tp, *_ in served.harness.markers.written} == {
            tp for tp in served.harness.markers.logs}, "every partition of the transaction got its marker"
        assert any(tp.topic == "__consumer_offsets" and tp.partition == partition
                   for tp, *_ in served.harness.markers.written)
    finally:
        served.close()


def test_add_partitions_is_all_or_nothing(tmp_path: Any) -> None:
    served = Served(tmp_path)
    try:
        pid = int(served.init().producer_id)
        # One unknown partition: it is UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.
        assert served.add(3, pid, 0, {"orders": [0], "missing": [0]}) == {("orders", 0): 55, ("missing", 0): 3}
        # A client never adds an internal topic itself; an unauthorized topic likewise fails the request.
        served.denied.add((Operation.WRITE, ResourceType.TOPIC, "secret"))
        assert served.add(3, pid, 0, {"__consumer_offsets": [0], "secret": [0], "orders": [1]}) == {
            ("__consumer_offsets", 0): 29, ("secret", 0): 29, ("orders", 1): 55}
        assert served.transactions.transactions["tx"].partitions == set(), "nothing was added"
    finally:
        served.close()


def test_errors_as_each_version_knows_them(tmp_path: Any) -> None:
    served = Served(tmp_path)
    try:
        pid = int(served.init().producer_id)
        assert served.init().producer_epoch == 1
        # A stale epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
        assert served.add(1, pid, 0, {"orders": [0]}) == {("orders", 0): 47}
        assert served.add(2, pid, 0, {"orders": [0]}) == {("orders", 0): 90}
        assert served.ask(END, 1, transactional_id="tx", producer_id=pid, producer_epoch=0,
                          committed=True).error_code == 47
        assert served.ask(END, 4, transactional_id="tx", producer_id=pid, producer_epoch=1,
                          committed=True).error_code == 48  # nothing to end: INVALID_TXN_STATE
        assert served.init(timeout_ms=900_001).error_code == 50  # INVALID_TRANSACTION_TIMEOUT
        served.denied.add((Operation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx"))
        assert served.init().error_code == 53
        assert served.add(3, pid, 1, {"orders": [0]}) == {("orders", 0): 53}
        assert served.ask(END, 4, transactional_id="tx", producer_id=pid, producer_epoch=1,
                          committed=False).error_code == 53
        served.denied = {(Operation.READ, ResourceType.GROUP, "g")}
        assert served.ask(ADD_OFFSETS, 4, transactional_id="tx", producer_id=pid, producer_epoch=1,
                          group_id="g").error_code == 30  # GROUP_AUTHORIZATION_FAILED
    finally:
        served.close()


def test_the_settings_reach_the_coordinator() -> None:
    from broker.config import load_config
    from broker.process.coordinator_main import transaction_topic_configs, txn_settings_from

    config = load_config(None, {"transaction.max.timeout.ms": "1000", "transaction.state.log.min.isr": "2"})
    assert txn_settings_from(config) == TxnSettings(max_timeout_ms=1000)
    assert transaction_topic_configs(config, 1)["min.insync.replicas"] == "1", "a lone replica must take writes"
    assert transaction_topic_configs(config, 3)["min.insync.replicas"] == "2"
    assert transaction_topic_configs(config, 3)["cleanup.policy"] == "compact"
