"""The transaction coordinator: InitProducerId (transactional), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, timeouts and transactional id expiration.

Semantics are Kafka's TransactionCoordinator, with its error codes at the same points, so
clients behave as they do against Kafka. transaction.version 1: the client adds partitions
itself and EndTxn keeps the epoch; the partition leaders verify that a partition was added
before a transaction's first batch there (``verify_partitions``, KIP-890). transaction.version
2 (a transaction whose partitions a broker added for the client, or EndTxn v5): every end
bumps the epoch, the markers carry the new one, and when the epochs run out the next
producer id is allocated at PrepareCommit/PrepareAbort and taken over at completion. Everything runs on the coordinator
process's asyncio loop: a transactional id is changed only there, and a change whose
write is in flight is marked pending (TransactionMetadata), which answers concurrent
requests CONCURRENT_TRANSACTIONS instead of taking a lock.

Two interfaces are given: ``TxnStateLog`` (the __transaction_state partitions; every
change is written there before it is applied or answered) and ``MarkerWriter`` (COMMIT or
ABORT markers to the transaction's partitions). Ending a transaction is Kafka's three
steps: PrepareCommit/PrepareAbort written and the client answered; the markers written
(retried until every partition has its marker); CompleteCommit/CompleteAbort written. A
coordinator elected later loads the log and does the last two steps for every
transaction it finds prepared.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Protocol

from kio.schema.errors import ErrorCode

from coordination.transactions import schema
from coordination.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_1,
    TV_2,
    ProducerFenced,
    TransactionMetadata,
    Transit,
    epoch_exhausted,
)
from coordination.transactions.state import EXPIRABLE, PREPARED, TransactionState
from coordination.transactions.views import ListFilters, TxnDescription, TxnListing, describe
from storage.types import TopicPartition

log = logging.getLogger(__name__)

E = ErrorCode
S = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"


class TxnStateLog(Protocol):
    """The __transaction_state partitions, as the coordinator writes them."""

    partitions: int

    async def append(self, partition: int, batch: bytes) -> int:
        """Append one record batch to ``partition`` (acks=all); the Kafka error code."""
        ...


class MarkerWriter(Protocol):
    async def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: list[TopicPartition], transaction_version: int = 0) -> dict[TopicPartition, int]:
        """A COMMIT or ABORT marker on each partition: a Kafka error code per partition,
        once the marker is committed there. ``transaction_version``: the transaction's
        (WriteTxnMarkers v2), which tells the partition what the marker's epoch means."""
        ...


@dataclass(frozen=True)
class TxnSettings:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    marker_retry_backoff_ms: int = 100
    # The finalized transaction.version feature: below 2, a request of version 2 (EndTxn
    # v5) is served as version 1 (no epoch bump), and the state log keeps value v0.
    transaction_version: int = TV_2


@dataclass(frozen=True)
class InitResult:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


# Marker errors after which the coordinator stops sending (it has been replaced: a newer
# coordinator epoch or producer epoch holds the partition), and errors that mean the
# partition cannot take a marker at all (treated as done, as Kafka does).
_FENCED = frozenset({int(E.invalid_producer_epoch), int(E.transaction_coordinator_fenced)})
_UNSUPPORTED = frozenset({int(E.unsupported_for_message_format), int(E.unsupported_version)})


def _append_error(code: int) -> int:
    """A failed write of the state log as the client sees it (Kafka's mapping)."""
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append,
                E.request_timed_out):
        return int(E.coordinator_not_available)
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return int(E.not_coordinator)
    if code in (E.message_too_large, E.record_list_too_large):
        return int(E.unknown_server_error)
    return code


def wall_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    """Every transactional id this coordinator serves (all __transaction_state partitions)."""

    def __init__(self, settings: TxnSettings, state_log: TxnStateLog, markers: MarkerWriter,
                 allocate_producer_id: Callable[[], Awaitable[int]], offsets_partition_for: Callable[[str], int],
                 clock: Callable[[], int] = wall_ms) -> None:
        self.settings = settings
        self.log = state_log
        self.markers = markers
        self.allocate_producer_id = allocate_producer_id
        self.offsets_partition_for = offsets_partition_for
        self.clock = clock
        self.transactions: dict[str, TransactionMetadata] = {}
        self.active = False
        self.loading = False
        self.epoch = -1  # the coordinator epoch the markers carry
        # Told once a marker is on a __consumer_offsets partition: (producer id, committed,
        # partition), so the group coordinator applies or drops that transaction's offsets.
        self.on_offsets_marker: Callable[[int, bool, int], None] = lambda _pid, _committed, _partition: None
        # Whether a topic still exists: a transaction's partition of a deleted topic gets no marker.
        self.topic_exists: Callable[[str], bool] = lambda _topic: True
        self._generation = 0  # bumped when the state is dropped or reloaded: older work stops
        self._background: set[asyncio.Task[Any]] = set()
        now = time.monotonic()
        self._last_abort_check = now
        self._last_expiry_check = now

    # ------------------------------------------------------------------ availability
    def _unavailable(self) -> int:
        if self.loading:
            return int(E.coordinator_load_in_progress)
        if not self.active:
            return int(E.not_coordinator)
        return 0

    @property
    def _value_version(self) -> int:
        """TransactionLogValue v1 (its tagged fields) once transaction.version 2 is on, as Kafka."""
        return 1 if self.settings.transaction_version >= TV_2 else 0

    def partition_for(self, transactional_id: str) -> int:
        return schema.partition_for(transactional_id, self.log.partitions)

    # ------------------------------------------------------------------ the operator's views
    def describe(self, transactional_id: str) -> TxnDescription:
        """DescribeTransactions for one id (TRANSACTIONAL_ID_NOT_FOUND if unknown)."""
        if not transactional_id:
            return TxnDescription(int(E.invalid_request))
        if code := self._unavailable():
            return TxnDescription(code)
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.state == S.DEAD:
            return TxnDescription(int(E.transactional_id_not_found))
        return describe(metadata)

    def list_transactions(self, filters: ListFilters) -> tuple[int, list[TxnListing]]:
        """ListTransactions: the ids this coordinator holds that pass ``filters``. A process
        that coordinates nothing (not the elected coordinator) answers an empty list with
        no error, as a Kafka broker leading no __transaction_state partition does: admin
        clients ask every broker and merge the answers."""
        if self.loading:
            return int(E.coordinator_load_in_progress), []
        if not self.active:
            return 0, []
        return 0, filters.select(list(self.transactions.values()), self.clock())

    # ------------------------------------------------------------------ load and resign
    def load(self, entries: Iterable[tuple[str, schema.TxnLogValue | None]], epoch: int) -> None:
        """Replay __transaction_state records in log order (later records win, tombstones
        delete), then serve; every transaction found prepared gets its markers and its
        completion written, as if its EndTxn had just been answered."""
        self.deactivate()
        self.epoch = epoch
        for transactional_id, value in entries:
            if value is None:
                self.transactions.pop(transactional_id, None)
            else:
                self.transactions[transactional_id] = TransactionMetadata.from_value(transactional_id, value)
        self.loading = False
        self.active = True
        for metadata in self.transactions.values():
            if metadata.state in PREPARED:
                self._in_background(self._complete(metadata, self._generation))

    def deactivate(self) -> None:
        """Resigned or fenced: stop the work under way and forget every transaction."""
        self.active = False
        self._generation += 1
        for task in list(self._background):
            task.cancel()
        self.transactions.clear()

    async def settled(self) -> None:
        """Wait for the work under way (markers, completions, timeouts) to end."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def _in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ writing the state
    async def _write(self, metadata: TransactionMetadata, transit: Transit) -> int:
        """Write ``transit`` to the id's partition; applied on success, forgotten otherwise."""
        generation = self._generation
        value = transit.to_value()
        batch = schema.state_batch([(schema.encode_key(metadata.transactional_id),
                                     None if value is None else schema.encode_value(value, self._value_version))],
                                   self.clock())
        try:
            code = await self.log.append(self.partition_for(metadata.transactional_id), batch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("transaction coordinator: writing %s failed: %s", metadata.transactional_id, exc)
            code = int(getattr(exc, "code", E.coordinator_not_available))
        if generation != self._generation:
            return int(E.not_coordinator)  # resigned meanwhile: this metadata is gone
        if code:
            metadata.abandon()
            return _append_error(code)
        metadata.complete(transit)
        return 0

    # ------------------------------------------------------------------ InitProducerId
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitResult:
        """A producer id and epoch for a transactional producer; ``expected`` is the
        (producer id, epoch) a v3+ client sends to recover (KIP-360)."""
        if not transactional_id:
            return InitResult(int(E.invalid_request))
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return InitResult(int(E.invalid_transaction_timeout))
        if code := self._unavailable():
            return InitResult(code)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            generation = self._generation
            try:
                producer_id = await self.allocate_producer_id()
            except Exception as exc:
                log.warning("transaction coordinator: no producer id for %s: %s", transactional_id, exc)
                return InitResult(int(E.coordinator_not_available))
            if generation != self._generation:
                return InitResult(int(E.not_coordinator))
            # Another InitProducerId for the same id may have created it meanwhile.
            metadata = self.transactions.setdefault(transactional_id, TransactionMetadata(
                transactional_id, producer_id, timeout_ms=timeout_ms, last_update_ms=self.clock()))
        prepared = await self._prepare_init(metadata, timeout_ms, expected)
        if isinstance(prepared, int):
            return InitResult(prepared)
        if prepared.state == S.PREPARE_EPOCH_FENCE:
            # Abort the ongoing transaction with the bumped epoch; that epoch is never
            # handed out: the client retries, and its retry bumps again.
            code = await self._end(metadata, prepared.producer_id, prepared.producer_epoch, False, from_client=False)
            return InitResult(code or int(E.concurrent_transactions))
        code = await self._write(metadata, prepared)
        if code:
            return InitResult(code)
        log.info("transaction coordinator: %s has producer id %d epoch %d", transactional_id, metadata.producer_id,
                 metadata.producer_epoch)
        return InitResult(0, metadata.producer_id, metadata.producer_epoch)

    async def _prepare_init(self, metadata: TransactionMetadata, timeout_ms: int,
                            expected: tuple[int, int] | None) -> Transit | int:
        if metadata.pending is not None:
            return int(E.concurrent_transactions)
        if expected is not None and not self._known_producer(metadata, expected):
            return int(E.producer_fenced)
        if metadata.state in PREPARED:
            return int(E.concurrent_transactions)
        if metadata.state == S.ONGOING:
            return metadata.prepare_fence_epoch()
        if epoch_exhausted(metadata.producer_epoch) and (expected is None or expected[1] == metadata.producer_epoch):
            generation = self._generation
            try:
                producer_id = await self.allocate_producer_id()
            except Exception as exc:
                log.warning("transaction coordinator: no producer id for %s: %s", metadata.transactional_id, exc)
                return int(E.coordinator_not_available)
            if generation != self._generation:
                return int(E.not_coordinator)
            if metadata.pending is not None:  # another request came while the id was allocated
                return int(E.concurrent_transactions)
            return metadata.prepare_rotate(producer_id, timeout_ms, self.clock(), expected is not None)
        try:
            return metadata.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], self.clock())
        except ProducerFenced as exc:
            log.info("transaction coordinator: %s fenced: %s", metadata.transactional_id, exc)
            return int(E.producer_fenced)

    @staticmethod
    def _known_producer(metadata: TransactionMetadata, expected: tuple[int, int]) -> bool:
        """Kafka's check of a recovering producer's id: the current one, any id while the
        metadata is new, or the previous one whose epochs ran out (a retried rotation)."""
        producer_id, epoch = expected
        return (metadata.producer_epoch == NO_PRODUCER_EPOCH or producer_id == metadata.producer_id
                or (producer_id == metadata.previous_producer_id and epoch_exhausted(epoch)))

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set[TopicPartition], transaction_version: int = TV_1) -> int:
        """The partitions join the transaction (one is started if none is ongoing). A v1
        client asks itself (AddPartitionsToTxn v0-3); for a v2 client the broker it
        produces to asks (v4+, not verify-only), and TxnOffsetCommit v5 adds the offsets
        partition: ``transaction_version`` 2 then marks the transaction as one whose end
        bumps the epoch."""
        if not transactional_id:
            return int(E.invalid_request)
        if code := self._unavailable():
            return code
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return int(E.invalid_producer_id_mapping)
        if metadata.producer_epoch != producer_epoch:
            return int(E.producer_fenced)
        if metadata.pending is not None or metadata.state in PREPARED:
            return int(E.concurrent_transactions)
        if metadata.state == S.ONGOING and partitions <= metadata.partitions:
            return 0
        return await self._write(metadata, metadata.prepare_add_partitions(partitions, self.clock(),
                                                                           transaction_version))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Whether each partition is in the producer's ongoing transaction (KIP-890: a
        partition leader asks before a transaction's first batch opens it there). Kafka's
        answers: TRANSACTION_ABORTABLE for one not added (the leader tells older clients
        INVALID_TXN_STATE), the producer's errors for all of them otherwise. Nothing is
        written, and the pending state is not looked at: the partition's verification
        guard catches an end that races with the append."""
        wanted = list(partitions)
        code = int(E.invalid_request) if not transactional_id else self._unavailable()
        metadata = self.transactions.get(transactional_id)
        if not code:
            if metadata is None or metadata.producer_id != producer_id:
                code = int(E.invalid_producer_id_mapping)
            elif metadata.producer_epoch != producer_epoch:
                code = int(E.producer_fenced)
            elif metadata.state in PREPARED:
                code = int(E.concurrent_transactions)
        if code or metadata is None:
            return {tp: code for tp in wanted}
        return {tp: 0 if tp in metadata.partitions and metadata.state == S.ONGOING else int(E.transaction_abortable)
                for tp in wanted}

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                          transaction_version: int = TV_1) -> int:
        """The group's __consumer_offsets partition joins the transaction (its offsets
        commit or abort with it): AddOffsetsToTxn, or TxnOffsetCommit v5 (version 2)."""
        partition = TopicPartition(OFFSETS_TOPIC, self.offsets_partition_for(group_id))
        return await self.add_partitions(transactional_id, producer_id, producer_epoch, {partition},
                                         transaction_version)

    def verify_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        """Whether the group's __consumer_offsets partition is in the transaction (a v1
        client's TxnOffsetCommit, after its AddOffsetsToTxn)."""
        partition = TopicPartition(OFFSETS_TOPIC, self.offsets_partition_for(group_id))
        return self.verify_partitions(transactional_id, producer_id, producer_epoch, [partition])[partition]

    # ------------------------------------------------------------------ EndTxn
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        """EndTxn v0-4 (transaction.version 1): the error code."""
        return (await self.end_transaction(transactional_id, producer_id, producer_epoch, commit, TV_1)).error_code

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                              transaction_version: int) -> InitResult:
        """EndTxn; from v5 (transaction.version 2) the answer carries the producer id and
        the epoch the client goes on with (bumped at every end)."""
        if not transactional_id:
            return InitResult(int(E.invalid_request))
        if code := self._unavailable():
            return InitResult(code)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            return InitResult(int(E.invalid_producer_id_mapping))
        code = await self._end(metadata, producer_id, producer_epoch, commit, from_client=True,
                               transaction_version=min(transaction_version, max(TV_1, self.settings.transaction_version)))
        if code:
            return InitResult(code)
        if metadata.next_producer_id != NO_PRODUCER_ID:
            # The epochs ran out: the client goes on with the next producer id, epoch 0.
            return InitResult(0, metadata.next_producer_id, 0)
        return InitResult(0, metadata.producer_id, metadata.producer_epoch)

    async def _end(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                   from_client: bool, transaction_version: int | None = None) -> int:
        fencing = metadata.pending == S.PREPARE_EPOCH_FENCE
        if fencing or not from_client:
            transaction_version = None  # the coordinator's abort: the fence bumped the epoch already
        if metadata.bumps_epoch_at_end and not fencing:
            code = self._check_end_v2(metadata, producer_id, producer_epoch, commit)
        else:
            code = self._check_end(metadata, producer_id, producer_epoch, commit, from_client)
        if code is not None:
            if fencing and metadata.pending == S.PREPARE_EPOCH_FENCE:
                metadata.abandon()
            return code
        next_producer_id = NO_PRODUCER_ID
        if transaction_version is not None and transaction_version >= TV_2 and epoch_exhausted(
                metadata.producer_epoch):
            generation = self._generation
            try:
                next_producer_id = await self.allocate_producer_id()
            except Exception as exc:
                log.warning("transaction coordinator: no producer id for %s: %s", metadata.transactional_id, exc)
                return int(E.coordinator_not_available)
            if generation != self._generation:
                return int(E.not_coordinator)
            if metadata.pending is not None:
                return int(E.concurrent_transactions)
        if fencing:
            # The fence's bumped epoch becomes the transaction's: the markers carry it, and
            # the partitions then refuse the old producer's epoch.
            metadata.pending = None
            metadata.producer_epoch = producer_epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        code = await self._write(metadata, metadata.prepare_end(commit, self.clock(), transaction_version,
                                                                next_producer_id))
        if code:
            if fencing and metadata is self.transactions.get(metadata.transactional_id):
                metadata.failed_epoch_fence = True
            return code
        self._in_background(self._complete(metadata, self._generation))
        return 0

    @staticmethod
    def _check_end(metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                   from_client: bool) -> int | None:
        """None to go on; otherwise the answer (0 for a retried EndTxn already done)."""
        if metadata.producer_id != producer_id:
            return int(E.invalid_producer_id_mapping)
        # A client must give the current epoch; the coordinator's own aborts carry a bumped one.
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return int(E.producer_fenced)
        if metadata.pending is not None and metadata.pending != S.PREPARE_EPOCH_FENCE:
            return int(E.concurrent_transactions)
        state = metadata.state
        if state == S.ONGOING:
            return None
        if state == S.COMPLETE_COMMIT or state == S.COMPLETE_ABORT:
            return 0 if commit == (state == S.COMPLETE_COMMIT) else int(E.invalid_txn_state)
        if state == S.PREPARE_COMMIT or state == S.PREPARE_ABORT:
            return int(E.concurrent_transactions) if commit == (state == S.PREPARE_COMMIT) else int(E.invalid_txn_state)
        return int(E.invalid_txn_state)  # Empty: nothing to end

    @staticmethod
    def _check_end_v2(metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool
                      ) -> int | None:
        """Kafka's checks for a transaction of a v2 client: the epoch was bumped at the
        last end, so a retry of that EndTxn comes with the epoch before (or, when the
        epochs ran out, with the previous producer id); the same epoch means the next end."""
        state = metadata.state
        retry_of_bump = metadata.producer_epoch == producer_epoch + 1
        retry_of_overflow = (producer_id == metadata.previous_producer_id and epoch_exhausted(producer_epoch)
                             and metadata.producer_epoch == 0)
        if metadata.producer_id != producer_id and not retry_of_overflow:
            return int(E.invalid_producer_id_mapping)
        if state in (S.ONGOING, S.EMPTY):
            valid = producer_epoch == metadata.producer_epoch
        elif state in PREPARED:
            valid = retry_of_bump
        else:  # CompleteCommit, CompleteAbort
            valid = retry_of_bump or retry_of_overflow
        if not valid:
            return int(E.producer_fenced)
        if metadata.pending is not None:
            return int(E.concurrent_transactions)
        if state == S.ONGOING:
            return None
        if state == S.COMPLETE_COMMIT or state == S.COMPLETE_ABORT:
            return 0 if commit == (state == S.COMPLETE_COMMIT) else int(E.invalid_txn_state)
        if state in PREPARED:
            return int(E.concurrent_transactions) if commit == (state == S.PREPARE_COMMIT) else int(E.invalid_txn_state)
        return int(E.invalid_txn_state)  # Empty: nothing to end

    # ------------------------------------------------------------------ markers and completion
    async def _complete(self, metadata: TransactionMetadata, generation: int) -> None:
        """Markers on every partition of a prepared transaction, then its completion."""
        commit = metadata.state == S.PREPARE_COMMIT
        producer_id, producer_epoch = metadata.producer_id, metadata.producer_epoch
        backoff = self.settings.marker_retry_backoff_ms / 1000
        while metadata.partitions:
            for tp in [tp for tp in metadata.partitions if not self.topic_exists(tp.topic)]:
                log.info("transaction coordinator: %s was deleted, no marker for it", tp)
                metadata.partitions.discard(tp)
            targets = sorted(metadata.partitions)
            if not targets:
                break
            try:
                results = await self.markers.write(producer_id, producer_epoch, commit, self.epoch, targets,
                                                   metadata.client_transaction_version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("transaction coordinator: markers for %s failed: %s", metadata.transactional_id, exc)
                results = {}
            if generation != self._generation:
                return
            for tp, code in results.items():
                if code == 0 or code in _UNSUPPORTED:
                    metadata.partitions.discard(tp)
                    if code == 0 and tp.topic == OFFSETS_TOPIC:
                        self.on_offsets_marker(producer_id, commit, tp.partition)
                elif code in _FENCED:
                    log.error("transaction coordinator: the marker of %s on %s was refused (%s): a newer coordinator "
                              "or producer holds it; stopping", metadata.transactional_id, tp, E(code).name)
                    return
            if metadata.partitions:
                await asyncio.sleep(backoff)
        while generation == self._generation and metadata.state in PREPARED and metadata.pending is None:
            code = await self._write(metadata, metadata.prepare_complete(self.clock()))
            if code == 0:
                return
            if code != E.coordinator_not_available:
                log.warning("transaction coordinator: completing %s failed (%s); a reload completes it",
                            metadata.transactional_id, code)
                return
            await asyncio.sleep(backoff)

    # ------------------------------------------------------------------ deadlines
    def tick(self) -> None:
        """Called every few hundred milliseconds: abort timed-out transactions, remove
        expired transactional ids, each at its interval."""
        if not self.active:
            return
        now = time.monotonic()
        if (now - self._last_abort_check) * 1000 >= self.settings.abort_timed_out_interval_ms:
            self._last_abort_check = now
            self.abort_timed_out()
        if (now - self._last_expiry_check) * 1000 >= self.settings.remove_expired_interval_ms:
            self._last_expiry_check = now
            self._in_background(self.remove_expired())

    def abort_timed_out(self) -> None:
        """Every Ongoing transaction older than its timeout is aborted with the producer's
        epoch bumped, as Kafka does: the producer, if alive, is fenced."""
        now = self.clock()
        for metadata in list(self.transactions.values()):
            if (metadata.state == S.ONGOING and metadata.pending is None
                    and metadata.start_ms + metadata.timeout_ms < now):
                log.info("transaction coordinator: aborting %s (producer id %d), it timed out",
                         metadata.transactional_id, metadata.producer_id)
                fence = metadata.prepare_fence_epoch()
                self._in_background(self._end(metadata, fence.producer_id, fence.producer_epoch, False,
                                              from_client=False))

    async def remove_expired(self) -> None:
        """Transactional ids idle longer than transactional.id.expiration.ms are removed: a
        tombstone per id, one batch per partition."""
        cutoff = self.clock() - self.settings.transactional_id_expiration_ms
        by_partition: dict[int, list[tuple[TransactionMetadata, Transit]]] = {}
        for metadata in list(self.transactions.values()):
            if metadata.state in EXPIRABLE and metadata.pending is None and metadata.last_update_ms <= cutoff:
                by_partition.setdefault(self.partition_for(metadata.transactional_id), []).append(
                    (metadata, metadata.prepare_dead()))
        generation = self._generation
        for partition, expiring in by_partition.items():
            batch = schema.state_batch([(schema.encode_key(m.transactional_id), None) for m, _ in expiring],
                                       self.clock())
            code = await self.log.append(partition, batch)
            if generation != self._generation:
                return
            for metadata, _transit in expiring:
                metadata.abandon()
                if code == 0 and self.transactions.get(metadata.transactional_id) is metadata:
                    del self.transactions[metadata.transactional_id]
            if code:
                log.warning("transaction coordinator: expiring ids on partition %d failed: %s", partition, code)
            else:
                log.info("transaction coordinator: removed %d expired transactional ids", len(expiring))
