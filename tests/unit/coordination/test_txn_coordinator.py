"""TransactionCoordinator over real partition logs: its state lands in __transaction_state
as Kafka's records, its markers land in the data partitions as control batches, and a
coordinator that loads the state log finishes what its predecessor prepared.

The state log is storage's PartitionLog in a temp dir (what a worker appends to), one per
__transaction_state partition; the marker writer appends markers to the data partitions'
PartitionLogs, as the owning worker does.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any, Awaitable, Callable

from kio.schema.errors import ErrorCode as E

from coordination.transactions import schema
from coordination.transactions.coordinator import OFFSETS_TOPIC, TransactionCoordinator, TxnSettings
from coordination.transactions.metadata import TV_2
from coordination.transactions.state import TransactionState
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.records import Record, encode_batch, iter_batches, parse_control_record
from storage.types import TopicPartition

STATE_PARTITIONS = 3
S = TransactionState


def open_log(directory: str, tp: TopicPartition) -> PartitionLog:
    return PartitionLog(os.path.join(directory, f"{tp.topic}-{tp.partition}"), tp, LogConfig(), clean_shutdown=True)


def records_of(log: PartitionLog) -> list[tuple[Any, list[Any]]]:
    data = log.read_bytes(0, 1 << 24) if log.log_end_offset else b""
    return list(iter_batches(data))


class FileTxnStateLog:
    partitions = STATE_PARTITIONS

    def __init__(self, directory: str) -> None:
        self.logs = [open_log(directory, TopicPartition("__transaction_state", p)) for p in range(STATE_PARTITIONS)]
        self.refuse: int = 0  # an error code every append answers, when set

    async def append(self, partition: int, batch: bytes) -> int:
        if self.refuse:
            return self.refuse
        self.logs[partition].append(memoryview(batch))
        return 0

    def entries(self) -> list[tuple[str, schema.TxnLogValue | None]]:
        out = []
        for log in self.logs:
            for _header, records in records_of(log):
                for record in records:
                    transactional_id = schema.decode_key(record.key)
                    assert transactional_id is not None
                    out.append((transactional_id, None if record.value is None else schema.decode_value(record.value)))
        return out

    def close(self) -> None:
        for log in self.logs:
            log.close()


class FileMarkerWriter:
    """Markers appended to real partition logs, one per (topic, partition)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.written: list[tuple[TopicPartition, int, int, bool, int]] = []
        self.failures: dict[TopicPartition, list[int]] = {}  # error codes to answer first, per partition

    def log(self, tp: TopicPartition) -> PartitionLog:
        if tp not in self.logs:
            self.logs[tp] = open_log(self.directory, tp)
        return self.logs[tp]

    async def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartition], transaction_version: int = 0) -> dict[TopicPartition, int]:
        results = {}
        for tp in partitions:
            pending_failures = self.failures.get(tp)
            if pending_failures:
                results[tp] = pending_failures.pop(0)
                continue
            self.log(tp).append_marker(producer_id, producer_epoch, commit, coordinator_epoch, leader_epoch=0,
                                       transaction_version=transaction_version)
            self.written.append((tp, producer_id, producer_epoch, commit, coordinator_epoch))
            results[tp] = 0
        return results

    def markers(self, tp: TopicPartition) -> list[tuple[int, int, bool, int]]:
        """(producer id, epoch, commit, coordinator epoch) of each marker in the partition's log."""
        out = []
        for header, records in records_of(self.log(tp)):
            if header.is_control:
                control = parse_control_record(records[0])
                out.append((header.producer_id, header.producer_epoch, control.is_commit, control.coordinator_epoch))
        return out

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


class Harness:
    def __init__(self, directory: str) -> None:
        self.state_log = FileTxnStateLog(directory)
        self.markers = FileMarkerWriter(directory)
        self.ids = itertools.count(1000)
        self.completed: list[tuple[int, bool, int]] = []

    async def allocate(self) -> int:
        return next(self.ids)

    def coordinator(self, epoch: int = 1, clock: Callable[[], int] | None = None,
                    offsets_partition_for: Callable[[str], int] = lambda _group: 2,
                    **settings: Any) -> TransactionCoordinator:
        made = TransactionCoordinator(TxnSettings(marker_retry_backoff_ms=10, **settings), self.state_log,
                                      self.markers, self.allocate, offsets_partition_for,
                                      **({"clock": clock} if clock else {}))
        made.on_offsets_marker = lambda pid, committed, partition: self.completed.append((pid, committed, partition))
        made.load(self.state_log.entries(), epoch)
        return made

    def close(self) -> None:
        self.state_log.close()
        self.markers.close()


def run(tmp_path: Any, body: Callable[[Harness], Awaitable[None]]) -> None:
    harness = Harness(str(tmp_path))

    async def bounded() -> None:
        await asyncio.wait_for(body(harness), 20)

    try:
        asyncio.run(bounded())
    finally:
        harness.close()


def last_state(harness: Harness, transactional_id: str) -> schema.TxnLogValue | None:
    values = [value for tid, value in harness.state_log.entries() if tid == transactional_id]
    return values[-1]


T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def test_init_allocates_then_bumps_and_fences_the_old_epoch(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        coord = h.coordinator()
        first = await coord.init_producer_id("tx", 60_000)
        assert (first.error_code, first.producer_id, first.producer_epoch) == (0, 1000, 0)
        second = await coord.init_producer_id("tx", 60_000)
        assert (second.error_code, second.producer_id, second.producer_epoch) == (0, 1000, 1)
        # The first producer is a zombie now.
        assert await coord.add_partitions("tx", 1000, 0, {T0}) == 90  # PRODUCER_FENCED
        assert await coord.end_txn("tx", 1000, 0, True) == 90
        assert await coord.add_partitions("tx", 999, 1, {T0}) == 49  # INVALID_PRODUCER_ID_MAPPING
        assert await coord.end_txn("unknown", 1000, 1, True) == 49
        assert await coord.end_txn("tx", 1000, 1, True) == 48, "nothing to end: INVALID_TXN_STATE"
        assert (await coord.init_producer_id("tx", 900_001)).error_code == 50  # INVALID_TRANSACTION_TIMEOUT
        assert (await coord.init_producer_id("", 1000)).error_code == 42  # INVALID_REQUEST
        state = last_state(h, "tx")
        assert state is not None and (state.producer_id, state.producer_epoch, state.status) == (1000, 1, 0)
        assert state.partitions is None, "an Empty transaction is written with null partitions"
        # KIP-360: the current producer recovering gets the next epoch; a retry of that
        # call (it expects the epoch before) gets the same answer; an older epoch is fenced.
        recovered = await coord.init_producer_id("tx", 60_000, (1000, 1))
        assert (recovered.error_code, recovered.producer_epoch) == (0, 2)
        retried = await coord.init_producer_id("tx", 60_000, (1000, 1))
        assert (retried.error_code, retried.producer_epoch) == (0, 2)
        assert (await coord.init_producer_id("tx", 60_000, (1000, 0))).error_code == 90
        assert (await coord.init_producer_id("tx", 60_000, (555, 2))).error_code == 90

    run(tmp_path, body)


def test_commit_writes_markers_to_every_partition_then_completes(tmp_path: Any) -> None:
    async def commit(h: Harness) -> None:
        coord = h.coordinator(epoch=4)
        pid = (await coord.init_producer_id("tx", 60_000)).producer_id
        assert await coord.add_partitions("tx", pid, 0, {T0, T1}) == 0
        assert await coord.add_offsets("tx", pid, 0, "group") == 0
        offsets_tp = TopicPartition(OFFSETS_TOPIC, 2)
        ongoing = last_state(h, "tx")
        assert ongoing is not None and ongoing.status == S.ONGOING
        assert ongoing.partitions == {OFFSETS_TOPIC: (2,), "orders": (0, 1)}
        # The producer's transactional records: the partition's LSO stays below them until the marker.
        data = h.markers.log(T0)
        data.append(encode_batch([Record(0, 1, b"k", b"v")], producer_id=pid, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))
        assert data.last_stable_offset == 0
        assert await coord.end_txn("tx", pid, 0, True) == 0
        # Answered once PrepareCommit is written; markers and completion follow.
        assert await coord.end_txn("tx", pid, 0, False) in (48, 51)
        await coord.settled()
        for tp in (T0, T1, offsets_tp):
            assert h.markers.markers(tp) == [(pid, 0, True, 4)]
        assert data.last_stable_offset == data.log_end_offset == 2, "the commit marker closed the transaction"
        assert h.completed == [(pid, True, 2)], "the group coordinator is told about its partition"
        statuses = [value.status for tid, value in h.state_log.entries() if tid == "tx" and value is not None]
        assert statuses == [S.EMPTY, S.ONGOING, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
        prepared = [v for t, v in h.state_log.entries() if v is not None and v.status == S.PREPARE_COMMIT][0]
        assert prepared.partitions == {OFFSETS_TOPIC: (2,), "orders": (0, 1)}
        assert coord.transactions["tx"].state == S.COMPLETE_COMMIT
        # A retried EndTxn of a completed commit is answered OK; an abort of it is not.
        assert await coord.end_txn("tx", pid, 0, True) == 0
        assert await coord.end_txn("tx", pid, 0, False) == 48
        # The next transaction starts from CompleteCommit.
        assert await coord.add_partitions("tx", pid, 0, {T1}) == 0
        assert await coord.end_txn("tx", pid, 0, False) == 0
        await coord.settled()
        assert h.markers.markers(T1) == [(pid, 0, True, 4), (pid, 0, False, 4)]
        assert h.markers.markers(T0) == [(pid, 0, True, 4)], "only the partitions of the transaction get markers"
        assert coord.transactions["tx"].state == S.COMPLETE_ABORT

    run(tmp_path, commit)


def test_abort_retries_a_partition_until_its_marker_is_written(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        coord = h.coordinator()
        pid = (await coord.init_producer_id("tx", 60_000)).producer_id
        assert await coord.add_partitions("tx", pid, 0, {T0, T1}) == 0
        h.markers.failures[T1] = [6, 19]  # NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS: retried
        assert await coord.end_txn("tx", pid, 0, False) == 0
        assert (await coord.init_producer_id("tx", 60_000)).error_code == 51, "markers pending: CONCURRENT_TRANSACTIONS"
        await coord.settled()
        assert h.markers.markers(T0) == [(pid, 0, False, 1)]
        assert h.markers.markers(T1) == [(pid, 0, False, 1)]
        assert coord.transactions["tx"].state == S.COMPLETE_ABORT

    run(tmp_path, body)


def test_a_new_producer_aborts_the_ongoing_transaction_of_the_old_one(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        coord = h.coordinator()
        pid = (await coord.init_producer_id("tx", 60_000)).producer_id
        assert await coord.add_partitions("tx", pid, 0, {T0}) == 0
        # The new producer is told to retry while the old transaction is aborted with a bumped epoch.
        assert (await coord.init_producer_id("tx", 60_000)).error_code == 51
        await coord.settled()
        assert h.markers.markers(T0) == [(pid, 1, False, 1)]
        assert coord.transactions["tx"].state == S.COMPLETE_ABORT
        assert await coord.end_txn("tx", pid, 0, True) == 90, "the old producer is fenced"
        again = await coord.init_producer_id("tx", 60_000)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, 2)

    run(tmp_path, body)


def test_a_failed_state_write_changes_nothing(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        coord = h.coordinator()
        pid = (await coord.init_producer_id("tx", 60_000)).producer_id
        h.state_log.refuse = 19  # NOT_ENOUGH_REPLICAS
        assert await coord.add_partitions("tx", pid, 0, {T0}) == 15, "COORDINATOR_NOT_AVAILABLE, as Kafka maps it"
        h.state_log.refuse = 0
        assert coord.transactions["tx"].state == S.EMPTY and coord.transactions["tx"].pending is None
        assert await coord.add_partitions("tx", pid, 0, {T0}) == 0

    run(tmp_path, body)


def test_a_new_coordinator_completes_a_prepared_commit(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        first = h.coordinator(epoch=1)
        pid = (await first.init_producer_id("tx", 60_000)).producer_id
        assert await first.add_partitions("tx", pid, 0, {T0, T1}) == 0
        assert await first.add_offsets("tx", pid, 0, "group") == 0
        h.markers.failures[T1] = [6] * 1000  # the first coordinator never gets this marker in
        assert await first.end_txn("tx", pid, 0, True) == 0
        await asyncio.sleep(0.05)
        first.deactivate()  # resigned before completing
        await first.settled()
        state = last_state(h, "tx")
        assert state is not None and state.status == S.PREPARE_COMMIT
        assert h.markers.markers(T1) == []
        h.markers.failures.clear()

        second = h.coordinator(epoch=2)
        assert second.transactions["tx"].state == S.PREPARE_COMMIT
        # While it completes, the producer is asked to wait.
        assert await second.end_txn("tx", pid, 0, True) in (51, 0)
        await second.settled()
        assert h.markers.markers(T1) == [(pid, 0, True, 2)], "the new coordinator writes with its own epoch"
        assert (pid, True, 2) in h.completed
        state = last_state(h, "tx")
        assert state is not None and state.status == S.COMPLETE_COMMIT and state.partitions == {}
        assert second.transactions["tx"].state == S.COMPLETE_COMMIT

        third = h.coordinator(epoch=3)
        assert third.transactions["tx"].state == S.COMPLETE_COMMIT
        assert (third.transactions["tx"].producer_id, third.transactions["tx"].producer_epoch) == (pid, 0)

    run(tmp_path, body)


def test_a_timed_out_transaction_is_aborted_by_the_tick_with_the_epoch_bumped(tmp_path: Any) -> None:
    now = [1_000_000]

    async def body(h: Harness) -> None:
        coord = h.coordinator(clock=lambda: now[0], abort_timed_out_interval_ms=0)
        pid = (await coord.init_producer_id("tx", 1_000)).producer_id
        assert await coord.add_partitions("tx", pid, 0, {T0}) == 0
        coord.tick()
        await coord.settled()
        assert coord.transactions["tx"].state == S.ONGOING, "within its timeout"
        now[0] += 1_001
        coord.tick()
        await coord.settled()
        assert coord.transactions["tx"].state == S.COMPLETE_ABORT
        assert h.markers.markers(T0) == [(pid, 1, False, 1)]
        assert await coord.end_txn("tx", pid, 0, True) == 90, "the producer that let it time out is fenced"
        statuses = [(v.status, v.producer_epoch) for t, v in h.state_log.entries() if t == "tx" and v is not None]
        assert statuses[-2:] == [(S.PREPARE_ABORT, 1), (S.COMPLETE_ABORT, 1)]

    run(tmp_path, body)


def test_an_idle_transactional_id_expires_with_a_tombstone(tmp_path: Any) -> None:
    now = [5_000_000]

    async def body(h: Harness) -> None:
        coord = h.coordinator(clock=lambda: now[0], transactional_id_expiration_ms=1_000)
        pid = (await coord.init_producer_id("old", 60_000)).producer_id
        busy = (await coord.init_producer_id("busy", 60_000)).producer_id
        assert await coord.add_partitions("busy", busy, 0, {T0}) == 0
        now[0] += 1_000
        await coord.remove_expired()
        assert "old" not in coord.transactions and "busy" in coord.transactions, "an ongoing one stays"
        assert last_state(h, "old") is None
        reloaded = h.coordinator()
        assert "old" not in reloaded.transactions
        again = await reloaded.init_producer_id("old", 60_000)
        assert again.error_code == 0 and again.producer_id != pid, "an expired id starts afresh"

    run(tmp_path, body)


def test_a_producer_whose_epochs_ran_out_gets_a_new_producer_id(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        # The state as a coordinator left it after the last epoch a client may have.
        value = schema.TxnLogValue(77, 32766, 60_000, int(S.COMPLETE_COMMIT), {}, 1, 1)
        h.state_log.logs[schema.partition_for("tx", STATE_PARTITIONS)].append(
            schema.state_batch([(schema.encode_key("tx"), schema.encode_value(value))], 1))
        coord = h.coordinator()
        rotated = await coord.init_producer_id("tx", 60_000, (77, 32766))
        assert (rotated.error_code, rotated.producer_epoch) == (0, 0) and rotated.producer_id != 77
        # A retry of that call (its answer was lost) is recognised by the previous producer id.
        retried = await coord.init_producer_id("tx", 60_000, (77, 32766))
        assert (retried.error_code, retried.producer_id) == (0, rotated.producer_id)
        # TransactionLogValue v1 (transaction.version 2, the default) keeps the previous producer id.
        assert last_state(h, "tx") == schema.TxnLogValue(rotated.producer_id, retried.producer_epoch, 60_000,
                                                         int(S.EMPTY), None, last_state(h, "tx").last_update_ms, -1,
                                                         previous_producer_id=77)

    run(tmp_path, body)


# ---------------------------------------------------------------------- KIP-890
def test_verification_answers_per_partition_without_writing(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        coord = h.coordinator()
        pid = (await coord.init_producer_id("tx", 60_000)).producer_id
        assert coord.verify_partitions("tx", pid, 0, [T0]) == {T0: E.transaction_abortable}, "no transaction yet"
        assert await coord.add_partitions("tx", pid, 0, {T0}) == 0
        written = len(h.state_log.entries())
        assert coord.verify_partitions("tx", pid, 0, [T0, T1]) == {T0: 0, T1: E.transaction_abortable}
        assert coord.verify_partitions("tx", pid, 1, [T0]) == {T0: E.producer_fenced}
        assert coord.verify_partitions("tx", pid + 1, 0, [T0]) == {T0: E.invalid_producer_id_mapping}
        assert coord.verify_partitions("", pid, 0, [T0]) == {T0: E.invalid_request}
        assert len(h.state_log.entries()) == written, "a verification writes nothing"
        assert await coord.end_txn("tx", pid, 0, True) == 0
        assert coord.verify_partitions("tx", pid, 0, [T0]) in ({T0: E.concurrent_transactions},
                                                               {T0: E.transaction_abortable})
        await coord.settled()
        assert coord.verify_partitions("tx", pid, 0, [T0]) == {T0: E.transaction_abortable}, "ended: a zombie's"

    run(tmp_path, body)


def test_a_v2_end_bumps_the_epoch_and_a_retry_gets_the_same_answer(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        coord = h.coordinator(epoch=3)
        pid = (await coord.init_producer_id("tx", 60_000)).producer_id
        assert await coord.add_partitions("tx", pid, 0, {T0}, TV_2) == 0
        ended = await coord.end_transaction("tx", pid, 0, True, TV_2)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, 1)
        await coord.settled()
        assert h.markers.markers(T0) == [(pid, 1, True, 3)], "the marker carries the bumped epoch"
        assert await coord.end_transaction("tx", pid, 0, True, TV_2) == ended, "a retry once complete"
        assert (await coord.end_transaction("tx", pid, 0, False, TV_2)).error_code == E.invalid_txn_state
        assert (await coord.end_transaction("tx", pid, 5, True, TV_2)).error_code == E.producer_fenced
        stored = last_state(h, "tx")
        assert stored is not None and (stored.status, stored.producer_epoch, stored.client_transaction_version) == (
            S.COMPLETE_COMMIT, 1, 2)
        # The next transaction goes on with the new epoch; the old one is fenced.
        assert await coord.add_partitions("tx", pid, 0, {T1}, TV_2) == E.producer_fenced
        assert await coord.add_partitions("tx", pid, 1, {T1}, TV_2) == 0
        aborted = await coord.end_transaction("tx", pid, 1, False, TV_2)
        assert (aborted.error_code, aborted.producer_epoch) == (0, 2)
        await coord.settled()
        assert h.markers.markers(T1) == [(pid, 2, False, 3)]

    run(tmp_path, body)


def test_a_v2_end_whose_epochs_run_out_hands_over_to_the_next_producer_id(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        value = schema.TxnLogValue(77, 32766, 60_000, int(S.ONGOING), {"orders": (0,)}, 1, 1,
                                   client_transaction_version=2)
        h.state_log.logs[schema.partition_for("tx", STATE_PARTITIONS)].append(
            schema.state_batch([(schema.encode_key("tx"), schema.encode_value(value, 1))], 1))
        coord = h.coordinator()
        ended = await coord.end_transaction("tx", 77, 32766, True, TV_2)
        prepared = last_state(h, "tx")
        assert prepared is not None and prepared.next_producer_id >= 1000, "the next id is written with PrepareCommit"
        assert (prepared.producer_id, prepared.producer_epoch) == (77, 32767), "the markers fence every epoch of 77"
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, prepared.next_producer_id, 0)
        await coord.settled()
        done = coord.transactions["tx"]
        assert (done.producer_id, done.producer_epoch, done.previous_producer_id) == (prepared.next_producer_id, 0, 77)
        # The client retries with the exhausted epoch of the old id: told the new id.
        retried = await coord.end_transaction("tx", 77, 32766, True, TV_2)
        assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (0, done.producer_id, 0)

    run(tmp_path, body)


def test_held_at_version_1_an_end_txn_v5_bumps_nothing(tmp_path: Any) -> None:
    async def body(h: Harness) -> None:
        coord = h.coordinator(transaction_version=1)
        pid = (await coord.init_producer_id("tx", 60_000)).producer_id
        assert await coord.add_partitions("tx", pid, 0, {T0}) == 0
        ended = await coord.end_transaction("tx", pid, 0, True, TV_2)
        assert (ended.error_code, ended.producer_epoch) == (0, 0)
        raw = [v for _k, v in h.state_log.entries()]
        assert raw and all(v is None or v.client_transaction_version == 0 for v in raw)

    run(tmp_path, body)
