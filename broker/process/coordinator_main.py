"""The coordinator process: campaigns, and once elected runs consumer groups and offsets,
the transaction coordinator and the share coordinator (share-partition state, KIP-932).

Started (and restarted) by the supervisor on every broker, beside the workers; it has no
client listener. It is the last endpoint of the broker's shared-memory rings
(broker/links/mesh.py), and workers hand it group and offset requests there::

    worker ──SERVE(api key, version, client id, host, principal, listener, request body)──▶ coordinator
           ◀── encoded response body ───────────────────────────────────────────────────
    worker ──FIND──▶ (error code, node id, host, port) of the elected coordinator

It reads and writes __consumer_offsets, __transaction_state and __share_group_state
(WorkerTopicLog) through
the owning workers' PartitionOps, over the same rings, and writes transaction markers
(broker/process/marker_writer.py) through the owning workers, or with WriteTxnMarkers to
the broker leading a partition.

Life:
    1. open the coordination backend (local file lock, or ZooKeeper) and campaign; the
       campaign blocks in a daemon thread, the loop keeps answering NOT_COORDINATOR
    2. elected with epoch E: make sure __consumer_offsets and __transaction_state exist,
       then load them partition by partition through the owning workers
       (COORDINATOR_LOAD_IN_PROGRESS meanwhile), and serve; transactions found prepared
       get their markers and completion written; every append to either topic carries E,
       and the owning worker refuses an epoch older than the backend's current one
       (fencing); E is also the coordinator epoch of every marker
    3. session SUSPENDED: stop serving (NOT_COORDINATOR) until CONNECTED again;
       LOST (or fenced): drop the groups, resign, campaign again
A process that replaces one that died resumes its ZooKeeper session, so it is elected again
at once: until its first campaign is decided and the offsets loaded, requests wait for it
(bounded) instead of being told NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS; workers
likewise hold requests while it is down (broker/process/node.py). Requests the dead process
held are answered by the workers at once (broker/coordinator/api.py, per API).
Deadlines (sessions, join and sync phases, offset retention, transaction timeouts and
transactional id expiry) are checked by a tick
every 100 ms on the loop; the heartbeat (broker/process/heartbeats.py) beats from the loop,
so a wedged loop gets the process replaced by the supervisor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import signal
import socket
import threading
import uuid
from typing import Any, Awaitable, Callable, Coroutine, Iterator

import orjson

from broker import apis
from broker.config import BrokerConfig
from broker.context import CoordinatorContext
from broker.coordinator.api import SERVED
from broker.coordinator.forwarded import Forwarded
from broker.dynamic_configs import DYNAMIC, DynamicBrokerConfigs
from broker.links import peer_codec
from broker.links.mesh import Mesh, Op, Parts
from broker.links.remote_ops import RemotePartitionOps
from broker.links.rings import SharedRings
from broker.logger_levels import BrokerLoggers
from broker.network.segment_files import SegmentFiles
from broker.partitions.partition_ops import AppendItem, CommitItem, ReadItem
from broker.partitions.placement import owner_index
from broker.partitions.remote_partition import RemotePartitionClient, coordinator_client_id
from broker.process import stop_signal
from broker.process.gc_freeze import freeze_long_lived
from broker.process.group_configs import open_group_configs
from broker.process.heartbeats import HeartbeatSlot
from broker.process.logs import set_role
from broker.process.marker_writer import WorkerMarkerWriter
from broker.process.reload import apply_in_child
from broker.process.session_file import forget_session, keep_session, read_session
from broker.protocol.errors import ErrorCode, KafkaError
from broker.security.broker_security import BrokerSecurity
from broker.security.inter_broker import ClientSecurity, inter_broker_security
from coordination.backend import CoordinationBackend, TopicRegistry
from coordination.finalized_features import TRANSACTION_VERSION, FinalizedFeatures, default_levels
from coordination.group_configs import GroupConfigs
from coordination.groups.consumer.assignors import parse_assignors
from coordination.groups.consumer.heartbeat import ConsumerSettings
from coordination.groups.consumer.service import RegistryCatalog
from coordination.groups.coordinator import CoordinatorSettings, GroupCoordinator
from coordination.groups.group import CONSUMER_PROTOCOL_TYPE, Group, parse_assignment_partitions
from coordination.groups.replay import load_entries
from coordination.groups.share.heartbeat import ShareSettings
from coordination.groups.state import GroupState
from coordination.open_backend import open_broker_backend
from coordination.share import state_coordinator as share_state
from coordination.share.state_coordinator import ShareStateCoordinator
from coordination.topics import TopicInfo
from coordination.transactions import schema as txn_schema
from coordination.transactions.coordinator import TransactionCoordinator, TxnSettings
from coordination.znodes import Endpoints
from storage.config import LogConfig
from storage.types import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = share_state.STATE_TOPIC
FIND_SHARE = 2  # a FIND's first byte when a broker asked for a share coordinator
BOOT_ERROR = 3
READ_CHUNK = 1 << 20
TICK_SECONDS = 0.1


async def _committed_to(marks: Callable[[], Awaitable[tuple[int, int, int]]], topic: str, partition: int,
                        end: int | None = None) -> tuple[int, int, int]:
    """Wait until the high watermark (the middle of ``marks()``: log start, high watermark,
    log end) reaches ``end``, by default the log end the first marks give; the last marks.
    COORDINATOR_LOAD_IN_PROGRESS after LOAD_WAITS tries."""
    for _ in range(LOAD_WAITS):
        found = await marks()
        end = found[2] if end is None else end
        if found[1] >= end:
            return found
        await asyncio.sleep(LOAD_WAIT)
    raise KafkaError(ErrorCode.coordinator_load_in_progress,
                     f"{topic}-{partition}: its high watermark is below its log end {end}")


def offsets_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """__consumer_offsets is compacted, as in Kafka; its segments preallocate 1 MiB at a
    time instead of the default window, because most of its 50 partitions stay tiny."""
    return {"cleanup.policy": "compact", "segment.bytes": str(config.get_int("offsets.topic.segment.bytes")),
            "preallocate.window.bytes": str(1 << 20)}


def settings_from(config: BrokerConfig) -> CoordinatorSettings:
    return CoordinatorSettings(
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        max_group_size=config.get_int("group.max.size"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
    )


def share_settings_from(config: BrokerConfig) -> ShareSettings:
    return ShareSettings(
        session_timeout_ms=config.get_int("group.share.session.timeout.ms"),
        heartbeat_interval_ms=config.get_int("group.share.heartbeat.interval.ms"),
        max_size=config.get_int("group.share.max.size"),
    )


def consumer_settings_from(config: BrokerConfig) -> ConsumerSettings:
    return ConsumerSettings(
        session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        max_size=config.get_int("group.consumer.max.size"),
        assignors=parse_assignors(config.get_str("group.consumer.assignors")),
        migration_policy=config.get_str("group.consumer.migration.policy"),
    )


TOPIC_REFRESH_SECONDS = 1.0


def transaction_topic_configs(config: BrokerConfig, replication_factor: int) -> dict[str, str]:
    """__transaction_state is compacted, as in Kafka; its min.insync.replicas is
    transaction.state.log.min.isr, at most its replicas (a lone broker's writes must pass)."""
    return {"cleanup.policy": "compact",
            "segment.bytes": str(config.get_int("transaction.state.log.segment.bytes")),
            "min.insync.replicas": str(min(config.get_int("transaction.state.log.min.isr"), replication_factor)),
            "unclean.leader.election.enable": "false", "preallocate.window.bytes": str(1 << 20)}


def share_state_topic_configs(config: BrokerConfig, replication_factor: int) -> dict[str, str]:
    """__share_group_state as Kafka creates it: cleanup.policy delete (KIP-932: its records
    are snapshots and updates, not a key's latest value), min.insync.replicas
    share.coordinator.state.topic.min.isr (at most its replicas). Kafka prunes the records
    before each share-partition's latest snapshot and rewrites cold partitions' snapshots,
    so time-based retention never drops live state; Castle does neither yet, so nothing is
    removed by time (retention.ms -1)."""
    return {"cleanup.policy": "delete", "retention.ms": "-1",
            "segment.bytes": str(config.get_int("share.coordinator.state.topic.segment.bytes")),
            "min.insync.replicas": str(min(config.get_int("share.coordinator.state.topic.min.isr"), replication_factor)),
            "unclean.leader.election.enable": "false", "preallocate.window.bytes": str(1 << 20)}


def txn_settings_from(config: BrokerConfig) -> TxnSettings:
    return TxnSettings(
        max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        transactional_id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
        abort_timed_out_interval_ms=config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        remove_expired_interval_ms=config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms"),
        transaction_version=config.get_int("transaction.version"),
    )


Locator = Callable[[int], tuple[int, str, int]]  # partition -> (holder broker, host, port)


CONTROL_INTERVAL = 1.0
START_WAIT = 5.0  # how long a request waits for a starting coordinator to serve
LOAD_WAIT, LOAD_WAITS = 0.05, 200  # a load waits up to 10 s for the high watermark to reach the log end
COMMIT_TIMEOUT_MS = 5_000  # offsets.commit.timeout.ms's default


EntriesOf = Callable[[bytes, int], tuple[list[tuple[Any, Any]], int]]


class WorkerTopicLog:
    """An internal topic (__consumer_offsets, __transaction_state) as the coordinator sees
    it. A partition this broker holds is written and read through its owning worker (the
    rings); a partition another broker holds, over the Kafka protocol like any client, with
    the epoch in the client id (broker/partitions/remote_partition.py). Every append carries
    the coordinator epoch. ``entries_of`` decodes the topic's records."""

    def __init__(self, mesh: Mesh, workers: int, topic: str, partitions: int, node_id: int, entries_of: EntriesOf,
                 security: ClientSecurity | None = None) -> None:
        self.security = security  # how to reach other brokers (inter.broker.listener.name)
        self.topic = topic
        self.entries_of = entries_of
        self.partitions = partitions
        self.workers = workers
        self.node_id = node_id
        self.epoch = -1
        # Calls wait for a worker that is restarting: the load of the offsets goes on when
        # it is back, within the timeout.
        self.links = [RemotePartitionOps(mesh, i, wait_for_peer=True) for i in range(workers)]
        self.locate: Locator = lambda _partition: (node_id, "", -1)
        self._remote: dict[tuple[str, int, int], RemotePartitionClient] = {}
        self.files = SegmentFiles(capacity=16)
        # Awaited before every append: False when the topic cannot be made ready (a topic
        # created on first use, as Kafka creates __transaction_state).
        self.before_append: Callable[[], Awaitable[bool]] | None = None

    def _link(self, tp: TopicPartition) -> RemotePartitionOps:
        return self.links[owner_index(tp, self.workers)]

    def remote_client(self, host: str, port: int) -> RemotePartitionClient:
        key = (host, port, self.epoch)
        client = self._remote.get(key)
        if client is None:
            client = self._remote[key] = RemotePartitionClient(host, port, coordinator_client_id(self.epoch),
                                                               security=self.security)
        return client

    async def append(self, partition: int, batch: bytes) -> int:
        if self.before_append is not None and not await self.before_append():
            return int(ErrorCode.coordinator_not_available)
        tp = TopicPartition(self.topic, partition)
        holder, host, port = self.locate(partition)
        if holder != self.node_id:
            if holder < 0 or port < 0:
                return int(ErrorCode.coordinator_not_available)  # its broker is down
            return await self.remote_client(host, port).produce(self.topic, partition, batch)
        link = self._link(tp)
        try:
            results = await link.append([AppendItem(tp, batch, 9)], self.epoch)
            if results[0].error_code:
                return int(results[0].error_code)
            # A commit is answered once every in-sync replica has it (acks=all).
            if results[0].high_watermark > results[0].base_offset:
                return 0  # committed at the append: this broker alone holds the partition
            (code,) = await link.wait_committed([CommitItem(tp, results[0].base_offset + 1)], COMMIT_TIMEOUT_MS)
        except KafkaError as exc:
            return int(exc.code)
        return int(code)

    async def read_partition(self, partition: int) -> list[tuple[Any, Any]]:
        """Every (key, value) of one partition, in log order, up to its leader's log end.

        A new leader's high watermark can lag its log end by the last batches (it learns the
        old leader's from its last fetch), and those include commits already answered: the
        load waits until the high watermark reaches the log end it saw first, as Kafka's
        coordinator loads up to the log end."""
        holder, host, port = self.locate(partition)
        if holder != self.node_id:
            if holder < 0 or port < 0:
                raise KafkaError(ErrorCode.coordinator_not_available, f"{self.topic}-{partition}: its broker is down")
            client = self.remote_client(host, port)

            def check(code: int) -> None:
                if code:
                    raise KafkaError(ErrorCode(code), f"reading {self.topic}-{partition} from broker {holder}")

            async def remote_marks() -> tuple[int, int, int]:
                code, log_start, high_watermark = await client.high_watermark(self.topic, partition)
                check(code)
                return log_start, high_watermark, -1  # its log end: asked once, below

            code, end = await client.log_end(self.topic, partition)
            check(code)
            await _committed_to(remote_marks, self.topic, partition, end)
            code, data = await client.read_all(self.topic, partition)
            check(code)
            return self.entries_of(data, 0)[0]
        tp = TopicPartition(self.topic, partition)
        link = self._link(tp)

        async def local_marks() -> tuple[int, int, int]:
            (state,) = await link.partition_state([tp])  # log start, high watermark, log end
            return state

        log_start, high_watermark, _end = await _committed_to(local_marks, self.topic, partition)
        entries: list[tuple[Any, Any]] = []
        offset = max(0, log_start)
        while offset < high_watermark:
            (result,) = await link.read([ReadItem(tp, offset, READ_CHUNK, False)], None)
            if result.error_code:
                raise KafkaError(ErrorCode(result.error_code), f"reading {tp} at {offset}")
            if not result.length:
                break
            data = self._read_range(result.path, result.inode, result.position, result.length)
            found, next_offset = self.entries_of(data, offset)
            entries.extend(found)
            if next_offset <= offset:
                raise KafkaError(ErrorCode.corrupt_message, f"{tp}: no progress reading at {offset}")
            offset = next_offset
        return entries

    def _read_range(self, path: str, inode: int, position: int, length: int) -> bytes:
        """The bytes the owner pointed at, from the same file (checked by inode, as Fetch does)."""
        fd = self.files.dup_fd(path, inode)
        if fd is None:
            raise KafkaError(ErrorCode.request_timed_out, f"{path} was replaced while loading")
        try:
            return os.pread(fd, length, position)
        finally:
            os.close(fd)

    async def close(self) -> None:
        for client in self._remote.values():
            await client.close()
        self.files.close()


def _entries_of(data: bytes, from_offset: int) -> tuple[list[Any], int]:
    """What the load replays (coordination/groups/replay.py's LoadEntry: records, with the
    producer of a transactional batch, and transaction markers) from the whole batches in
    ``data`` at or after ``from_offset``, and the offset after the last whole batch
    (``from_offset`` if there is none)."""
    return load_entries(data, from_offset)


class CoordinatorProcess:
    def __init__(self, config: BrokerConfig, workers: int, run_dir: str, rings: SharedRings,
                 heartbeat: HeartbeatSlot, cluster_id: str) -> None:
        self.config = config
        self.workers = workers
        self._background: set[asyncio.Task[Any]] = set()
        self.node_id = config.node_id
        self.run_dir = run_dir
        self.cluster_id = cluster_id
        self.zookeeper = bool(config.get_str("zookeeper.connect"))
        self.heartbeat = heartbeat
        self.mesh = Mesh(rings, rings.coordinator)
        self.mesh.handlers[Op.SERVE] = self._serve_call
        self.mesh.handlers[Op.FIND] = self._find_call
        self.offsets_log = WorkerTopicLog(self.mesh, workers, OFFSETS_TOPIC, config.get_int("offsets.topic.num.partitions"),
                                          self.node_id, _entries_of)
        self.offsets_log.locate = lambda partition: self.locate_partition(OFFSETS_TOPIC, partition)
        self.txn_log = WorkerTopicLog(self.mesh, workers, TRANSACTION_TOPIC,
                                      config.get_int("transaction.state.log.num.partitions"), self.node_id,
                                      txn_schema.entries_of)
        self.txn_log.locate = lambda partition: self.locate_partition(TRANSACTION_TOPIC, partition)
        self.txn_log.before_append = self._transaction_topic_ready
        self._txn_topic: asyncio.Future[None] | None = None
        self.share_log = WorkerTopicLog(self.mesh, workers, SHARE_STATE_TOPIC,
                                        config.get_int("share.coordinator.state.topic.num.partitions"), self.node_id,
                                        share_state.entries_of)
        self.share_log.locate = lambda partition: self.locate_partition(SHARE_STATE_TOPIC, partition)
        self.share_log.before_append = self._share_topic_ready
        self._share_topic: asyncio.Future[None] | None = None
        self.share_state = ShareStateCoordinator(
            self.share_log, self._topic_id_known,
            config.get_int("share.coordinator.snapshot.update.records.per.snapshot"))
        # The ACLs the group and offset APIs check (the workers check the others).
        self.security = BrokerSecurity(config)
        # Caches kept by watches, so the answers to workers never wait on ZooKeeper.
        listeners = config.listeners
        self.inter_broker = listeners.inter_broker
        self.brokers: dict[int, Endpoints] = {self.node_id: listeners.advertised}
        self.elected: tuple[int, int] | None = None
        # Share groups initialize and delete their partitions' state in the share coordinator,
        # which this process also runs.
        self.coordinator = GroupCoordinator(settings_from(config), self.offsets_log, consumer_settings_from(config),
                                            share_settings_from(config), self.share_state)
        self.coordinator.on_group_change = self._mirror_group
        markers = WorkerMarkerWriter(self.txn_log.links, self.node_id,
                                     lambda tp: self.locate_partition(tp.topic, tp.partition), self.txn_log.remote_client)
        self.transactions = TransactionCoordinator(txn_settings_from(config), self.txn_log, markers,
                                                   self._allocate_producer_id, self.coordinator.partition_for)
        self.transactions.on_offsets_marker = self._offsets_marker_written
        # Refreshing on a miss matters: a v2 transaction's partitions come from the leaders (the
        # worker saw the topic), so this process may not have read the topic when the markers go.
        self.transactions.topic_exists = lambda topic: self._topic_info(topic) is not None
        self._producer_ids: Iterator[int] = iter(())
        # One thread writes the group mirror, so a group's writes land in order.
        self._mirror_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="group-mirror")
        self.backend: CoordinationBackend | None = None
        self.group_configs: GroupConfigs | None = None
        self.features: FinalizedFeatures | None = None
        # The broker-wide topic defaults the controller reads (unclean.leader.election.enable),
        # with the dynamic broker configs on top (kafka-configs --entity-type brokers).
        self.log_defaults = LogConfig.from_broker_config(config.storage_settings())
        self.dynamic_configs: DynamicBrokerConfigs | None = None
        self.topics: TopicRegistry | None = None
        self.stopping = asyncio.Event()
        self.parent = os.getppid()
        self.suspended = False
        self._session_lost = asyncio.Event()
        self.elected_epoch = -1
        self._control_wake = asyncio.Event()
        # Set once the first campaign is decided and, if won, __consumer_offsets is loaded.
        self.started = asyncio.Event()

    # ------------------------------------------------------------------ the workers' calls
    def _serve_call(self, body: memoryview) -> "asyncio.Future[Parts]":
        """A group or offset request a worker hands over, its body as the client sent it
        (copied off the ring before the handler waits on anything); decoded here, once."""
        forwarded = Forwarded.of_message(body)
        served = SERVED.get(forwarded.api_key)
        if served is None:
            raise KafkaError(ErrorCode.invalid_request, f"api {forwarded.api_key} is not a coordinator api")

        async def answer() -> Parts:
            await self._until_started()
            return [await served.answer(forwarded, self._context_for)]

        return asyncio.ensure_future(answer())

    def _find_call(self, body: memoryview) -> "Parts | asyncio.Future[Parts]":
        if len(body) and body[0] == 1 and self.topics is not None:
            # Asked for a transaction coordinator: Kafka creates __transaction_state then, on
            # whichever broker is asked; the first transactional write waits for the same creation.
            self._in_background(self._transaction_topic_ready())
        elif len(body) and body[0] == FIND_SHARE and self.topics is not None:
            self._in_background(self._share_topic_ready())  # as Kafka creates __share_group_state
        if self.started.is_set():
            return peer_codec.encode_found(*self.find())

        async def answer() -> Parts:
            await self._until_started()
            return peer_codec.encode_found(*self.find())

        return asyncio.ensure_future(answer())

    async def _until_started(self) -> None:
        """A process that replaces a coordinator that died (kill -9, a crash) resumes its
        ZooKeeper session and is elected again at once: requests that come while it
        campaigns and loads wait for it (bounded) rather than get NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS, which would send clients looking for the coordinator
        again. Not when another broker is the coordinator: that answer is known now."""
        deadline = asyncio.get_running_loop().time() + START_WAIT
        while not self.started.is_set() and (self.elected is None or self.elected[0] == self.node_id):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            try:  # woken when started; looks again at who is elected (learned from ZooKeeper meanwhile)
                await asyncio.wait_for(self.started.wait(), min(left, 0.1))
            except TimeoutError:
                pass

    def _context_for(self, forwarded: Forwarded, version: int) -> CoordinatorContext:
        principal, host = forwarded.principal, forwarded.client_host.lstrip("/")
        return CoordinatorContext(self.coordinator, forwarded.api_key, version, forwarded.client_id,
                                  forwarded.client_host, self.topic_exists,
                                  lambda op, kind, name: self.security.authorize(principal, host, op, kind, name),
                                  self.transactions, lambda: self.security.is_broker(principal, host),
                                  self.share_state, self.high_watermark)

    def find(self) -> tuple[int, int, str, int]:
        """Where the elected coordinator is: (error, node id, host, port)."""
        if self.coordinator.active or self.coordinator.loading:
            host, port = self.config.listeners.advertised[self.inter_broker]
            return 0, self.node_id, host, port
        if self.elected is not None and self.elected[0] != self.node_id:
            address = self.brokers.get(self.elected[0], {}).get(self.inter_broker)
            if address is not None:
                return 0, self.elected[0], address[0], address[1]
        return int(ErrorCode.coordinator_not_available), -1, "", -1

    async def high_watermark(self, topic: str, partition: int) -> int:
        """A partition's high watermark, from the worker that owns it here or its leader's
        broker (-1: not known); a share group's lag is measured from it."""
        holder, host, port = self.locate_partition(topic, partition)
        try:
            if holder == self.node_id:
                tp = TopicPartition(topic, partition)
                (state,) = await self.offsets_log.links[owner_index(tp, self.workers)].partition_state([tp])
                return int(state.high_watermark)
            if holder < 0 or port < 0:
                return -1
            code, _start, mark = await self.offsets_log.remote_client(host, port).high_watermark(topic, partition)
            return mark if code == 0 else -1
        except Exception as exc:  # noqa: BLE001 - a lag is left unknown, never an error
            log.info("coordinator: high watermark of %s-%d not known: %s", topic, partition, exc)
            return -1

    def locate_partition(self, topic: str, partition: int) -> tuple[int, str, int]:
        """(holder, host, port) of a partition (an internal topic's, or one a transaction
        wrote to), from the caches."""
        if not self.zookeeper or self.topics is None:
            return self.node_id, "", -1
        try:
            state = self.registry.partition_states(topic).get(partition)
            replicas = self.registry.replicas(topic).get(partition) or [-1]
        except Exception:
            return -1, "", -1
        holder = state.leader if state is not None else replicas[0]
        host, port = self.brokers.get(holder, {}).get(self.inter_broker, ("", -1))
        return holder, host, port

    async def _allocate_producer_id(self) -> int:
        """A producer id for a transactional id, from a block reserved in the topic registry
        (as the workers reserve theirs: ids are unique across processes and restarts)."""
        for producer_id in self._producer_ids:
            return producer_id
        block = self.config.get_int("producer.id.block.size")
        first = await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.registry.allocate_producer_ids(block))
        self._producer_ids = iter(range(first + 1, first + block))
        return int(first)

    def _offsets_marker_written(self, producer_id: int, committed: bool, partition: int) -> None:
        """A transaction's marker is on a __consumer_offsets partition: its offsets there
        become visible (commit) or are dropped (abort)."""
        self.coordinator.complete_transaction(producer_id, committed, partition)

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        """(group, topic, partition, offset) of every group this coordinator serves, for
        the metrics endpoint (its own thread: snapshots taken with list(), atomic under
        the GIL, never iterating a dict the loop may be changing)."""
        out = []
        for group_id, group in list(self.coordinator.groups.items()):
            for (topic, partition), value in list(group.offsets.items()):
                out.append((group_id, topic, partition, value.offset))
        return out

    def _apply_dynamic(self, values: dict[str, Any]) -> None:
        """On the loop: new dynamic broker configs (the reader's thread hands them over)."""
        changed = {name: value for name, value in values.items() if self.config.value(name) != value}
        if changed:
            self.config.update(changed)
            self.log_defaults = LogConfig.from_broker_config(self.config.storage_settings())
            log.info("coordinator: dynamic broker configs%s", "".join(f" {k}={v}" for k, v in sorted(changed.items())))

    def _reload_settings(self) -> None:
        """SIGHUP (broker/process/reload.py): the file's values are static ones, beneath any dynamic one."""
        apply_in_child(self.config, self.run_dir)
        self.log_defaults = LogConfig.from_broker_config(self.config.storage_settings())
        if self.dynamic_configs is not None:
            self.dynamic_configs.set_static({name: self.config.value(name) for name in DYNAMIC})
            self._apply_dynamic(self.dynamic_configs.effective())

    @property
    def opened(self) -> CoordinationBackend:
        assert self.backend is not None, "serve() opens the backend before anything uses it"
        return self.backend

    @property
    def registry(self) -> TopicRegistry:
        assert self.topics is not None, "serve() opens the backend before anything uses it"
        return self.topics

    def _topic_id_known(self, topic_id: uuid.UUID, partition: int) -> bool:
        """The cluster has this topic (by id) and partition: what the share coordinator asks
        of every share-partition it is told of (Kafka looks in its metadata image)."""
        if self.topics is None:
            return False
        info = self.registry.by_id(topic_id)
        if info is None and self.registry.refresh():
            info = self.registry.by_id(topic_id)
        return info is not None and info.has_partition(partition)

    def _topic_info(self, topic: str) -> TopicInfo | None:
        """The topic as the registry knows it, re-read once when it is missing (created since)."""
        if self.topics is None:
            return None
        info = self.registry.get(topic)
        if info is None and self.registry.refresh():
            info = self.registry.get(topic)
        return info

    def topic_exists(self, topic: str, partition: int) -> bool:
        info = self._topic_info(topic)
        return info is not None and info.has_partition(partition)

    # ------------------------------------------------------------------ life
    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stopping.set)
        if stop_signal.requested:  # it came before the loop handled signals
            self.stopping.set()
        loop.add_signal_handler(signal.SIGHUP, self._reload_settings)
        apis.load_all()
        self.mesh.start()
        # Logger levels set with kafka-configs --entity-type broker-loggers reach this process too.
        loggers = BrokerLoggers(self.run_dir)
        loggers.start()
        try:
            self.backend = await loop.run_in_executor(None, open_broker_backend, self.config,
                                                      read_session(self.run_dir))
            keep_session(self.run_dir, self.backend.session_credentials())
        except Exception:
            log.exception("coordinator: cannot open the coordination backend")
            return BOOT_ERROR
        self.topics = self.opened.topics()
        self.coordinator.consumer.catalog = RegistryCatalog(self.topics)
        self.coordinator.share.catalog = RegistryCatalog(self.topics)
        try:
            self.group_configs = await loop.run_in_executor(None, open_group_configs, self.config,
                                                            self.opened.group_configs())
        except Exception:
            log.exception("coordinator: cannot read the group configs")
            return BOOT_ERROR
        self.coordinator.consumer.group_configs = self.group_configs
        try:
            self.dynamic_configs = DynamicBrokerConfigs(
                self.opened.broker_configs(), self.config,
                lambda values: loop.call_soon_threadsafe(self._apply_dynamic, values))
            await loop.run_in_executor(None, self.dynamic_configs.start)
        except Exception:
            log.exception("coordinator: cannot read the dynamic broker configs")
            return BOOT_ERROR
        self.coordinator.share.group_configs = self.group_configs
        # transaction.version as finalized (UpdateFeatures may change it while we run).
        self.features = FinalizedFeatures(self.opened.features(), default_levels(self.config.get_int("transaction.version")))
        self.features.on_change(lambda levels, _epoch: loop.call_soon_threadsafe(
            self._transaction_version_changed, levels.get(TRANSACTION_VERSION, 0)))
        try:
            await loop.run_in_executor(None, self.features.start)
        except Exception:
            log.exception("coordinator: cannot read the finalized features")
            return BOOT_ERROR
        self._transaction_version_changed(self.features.level(TRANSACTION_VERSION))
        try:
            secret = await loop.run_in_executor(None, self.opened.broker_secret)
        except Exception:
            log.exception("coordinator: cannot read the broker secret")
            return BOOT_ERROR
        self.offsets_log.security = inter_broker_security(self.config, secret)
        self.txn_log.security = self.offsets_log.security
        self.share_log.security = self.offsets_log.security
        self.security.set_broker_secret(secret, self.offsets_log.security)
        if self.security.authorizer_on:
            self.security.watch_acls(self.opened.acls())
        self.opened.add_state_listener(lambda state: loop.call_soon_threadsafe(self._on_session_state, state))
        if self.zookeeper:
            try:
                await loop.run_in_executor(None, self._join_cluster)
            except Exception as exc:
                log.error("coordinator: cannot join the cluster: %s", exc)
                return BOOT_ERROR
            self.opened.watch_brokers(lambda: loop.call_soon_threadsafe(self._refresh_soon))
            self.opened.watch_coordinator(lambda: loop.call_soon_threadsafe(self._refresh_soon))
        tasks = [loop.create_task(self._campaign_forever()), loop.create_task(self._tick()),
                 loop.create_task(self._heartbeat()), loop.create_task(self._refresh_topics())]
        if self.zookeeper:
            tasks.append(loop.create_task(self._control()))
        log.info("coordinator (pid %d) campaigning as broker %d", os.getpid(), self.node_id)
        await self.stopping.wait()
        for task in tasks:
            task.cancel()
        # Bounded: in Python 3.11 a cancellation that meets a reply arriving at the same
        # moment can be swallowed by asyncio.wait_for (a call's timeout), and the task
        # runs on; the campaign loop also checks ``stopping`` for that reason.
        await asyncio.wait(tasks, timeout=2)
        self.coordinator.deactivate()
        self.transactions.deactivate()
        self.share_state.deactivate()
        await self.offsets_log.close()
        await self.txn_log.close()
        await self.share_log.close()
        self.mesh.close()
        if self.group_configs is not None:
            self.group_configs.close()
        if self.features is not None:
            self.features.close()
        if self.dynamic_configs is not None:
            self.dynamic_configs.close()
        loggers.close()
        self._mirror_executor.shutdown(wait=True, cancel_futures=False)
        try:
            self.opened.close()  # ends the session: the broker's registration goes with it
            forget_session(self.run_dir)
        except Exception:
            log.exception("coordinator: closing the backend failed")
        log.info("coordinator stopped")
        return 0

    def _mirror_group(self, group: Group) -> None:
        """Keep /consumers/<group>/ids and /owners (or the local backend's group file)
        current, for operators; written off the loop, fenced by the backend."""
        backend = self.backend
        if backend is None:
            return
        group_id = group.group_id
        if group.is_(GroupState.DEAD):
            self._mirror_executor.submit(_log_failure, backend.delete_group, group_id)
            return
        members = {m.member_id: orjson.dumps({
            "version": 1, "client_id": m.client_id, "client_host": m.client_host,
            "group_instance_id": m.group_instance_id, "session_timeout_ms": m.session_timeout_ms,
            "rebalance_timeout_ms": m.rebalance_timeout_ms, "generation": group.generation})
            for m in group.members.values()}
        owners: dict[tuple[str, int], str] = {}
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            for m in group.members.values():
                try:
                    owners.update({tp: m.member_id for tp in parse_assignment_partitions(m.assignment)})
                except ValueError:
                    pass  # a client's own assignment format: members only
        self._mirror_executor.submit(_log_failure, backend.write_group_members, group_id, members)
        self._mirror_executor.submit(_log_failure, backend.write_group_owners, group_id, owners)

    def _join_cluster(self) -> None:
        """ZooKeeper mode: the cluster id must match the log dirs', and this broker
        registers (a live broker with the same node.id stops this one, with a message)."""
        stored = self.opened.cluster_id(self.cluster_id)
        if stored != self.cluster_id:
            raise RuntimeError(f"ZooKeeper holds cluster id {stored}, the log dirs belong to cluster {self.cluster_id}")
        listeners = self.config.listeners
        self.opened.register_broker(self.node_id, listeners.advertised, listeners.protocol_map,
                                     wait_for_stale=self.config.get_int("zookeeper.session.timeout.ms") / 1000)
        self.brokers = dict(self.opened.live_brokers())
        self.elected = self.opened.coordinator()

    def _refresh_soon(self) -> None:
        self._control_wake.set()
        self._in_background(self._refresh_caches())

    def _in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` as a task held until it is done (the loop keeps only weak references)."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _refresh_caches(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            brokers, elected = await loop.run_in_executor(
                None, lambda: (self.opened.live_brokers(), self.opened.coordinator()))
        except Exception as exc:
            log.warning("coordinator: cannot refresh brokers and coordinator: %s", exc)
            return
        self.brokers, self.elected = dict(brokers), elected

    async def _control(self) -> None:
        """ZooKeeper mode: while elected, this process is also the controller
        (coordination/controller.py), one pass a second and at once when a broker comes
        or goes."""
        from coordination.controller import Controller
        from coordination.zookeeper_topics import ZooKeeperTopicRegistry  # ZooKeeper mode only: kazoo

        loop = asyncio.get_running_loop()
        registry = self.registry
        assert isinstance(registry, ZooKeeperTopicRegistry), "partition states are znodes"
        controller = Controller(registry, lambda: set(self.opened.live_brokers()),
                                lambda configs: self.log_defaults.with_overrides(configs).unclean_leader_election_enable,
                                {OFFSETS_TOPIC: self.config.get_int("offsets.topic.replication.factor"),
                                 TRANSACTION_TOPIC: self.config.get_int("transaction.state.log.replication.factor"),
                                 SHARE_STATE_TOPIC: self.config.get_int(
                                     "share.coordinator.state.topic.replication.factor")},
                                (float(self.config.get_int("leader.imbalance.check.interval.seconds")),
                                 self.config.get_int("leader.imbalance.per.broker.percentage"))
                                if self.config.get_bool("auto.leader.rebalance.enable") else None)
        while True:
            if self.elected_epoch >= 0 and not self.suspended:
                try:
                    await loop.run_in_executor(None, controller.run_once, self.elected_epoch)
                except Exception as exc:
                    log.warning("controller: a pass failed: %s", exc)
            self._control_wake.clear()
            try:
                await asyncio.wait_for(self._control_wake.wait(), CONTROL_INTERVAL)
            except TimeoutError:
                pass

    def _transaction_version_changed(self, level: int) -> None:
        """Serve EndTxn and write the transaction log as the finalized transaction.version says."""
        settings = self.transactions.settings
        if settings.transaction_version != level:
            log.info("coordinator: transaction.version is now %d", level)
            self.transactions.settings = dataclasses.replace(settings, transaction_version=level)

    def _on_session_state(self, state: str) -> None:
        if state == "SUSPENDED":
            self.suspended = True
            if self.coordinator.active:
                log.warning("coordinator: session suspended, not serving until it reconnects")
                self.coordinator.active = False
            self.transactions.active = False
            self.share_state.active = False
        elif state == "CONNECTED":
            # After a LOST this is a new session: a successor must resume this one.
            keep_session(self.run_dir, self.opened.session_credentials())
            if self.suspended and self.elected_epoch >= 0 and not self._session_lost.is_set():
                log.info("coordinator: session reconnected, serving again")
                self.coordinator.active = not self.coordinator.loading
                self.transactions.active = not self.transactions.loading
                self.share_state.active = not self.share_state.loading
            self.suspended = False
        elif state == "LOST":
            log.warning("coordinator: session lost, resigning")
            self._session_lost.set()
            if self.zookeeper:
                self._in_background(self._reregister())

    async def _reregister(self) -> None:
        """The lost session took this broker's registration with it: register again (kazoo
        reconnects with a new session on its own)."""
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.opened.reregister)
        except Exception as exc:
            log.error("coordinator: cannot register again after losing the session: %s", exc)

    async def _campaign_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stopping.is_set():
            self._session_lost.clear()
            epoch = await self._in_thread(self.opened.campaign, self.node_id)
            self.elected_epoch = epoch
            self.offsets_log.epoch = epoch
            self.txn_log.epoch = epoch
            self.share_log.epoch = epoch
            # Before any write carrying it: the workers fence with it at once, whenever
            # their own watch reports it (a ring keeps the note before the writes).
            self._tell_epoch()
            log.info("coordinator: elected with epoch %d", epoch)
            try:
                await self._become_active()
            except Exception:
                log.exception("coordinator: loading __consumer_offsets, __transaction_state or __share_group_state "
                              "failed; resigning")
                self.coordinator.loading = False
                self.transactions.loading = False
                self.share_state.loading = False
                self._session_lost.set()
            self.started.set()
            await self._session_lost.wait()
            self.coordinator.deactivate()
            self.transactions.deactivate()
            self.share_state.deactivate()
            self.elected_epoch = -1
            try:
                await loop.run_in_executor(None, self.opened.resign)
            except Exception:
                log.exception("coordinator: resign failed")
            await asyncio.sleep(0.5)

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking call in a daemon thread (a campaign may block for as long as
        another coordinator lives; a daemon thread never holds up the exit)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def run() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the loop
                loop.call_soon_threadsafe(_set_exception, future, exc)
            else:
                loop.call_soon_threadsafe(_set_result, future, result)

        threading.Thread(target=run, name=f"coordinator-{getattr(fn, '__name__', 'call')}", daemon=True).start()
        return await future

    def _tell_epoch(self) -> None:
        for worker in range(self.workers):
            self.mesh.note(worker, Op.EPOCH, peer_codec.encode_epoch(self.elected_epoch))

    async def _become_active(self) -> None:
        self.coordinator.loading = True
        self.transactions.loading = True
        self.share_state.loading = True
        await self._ensure_internal_topic(self.offsets_log, self.config.get_int("offsets.topic.replication.factor"),
                                          lambda _factor: offsets_topic_configs(self.config))
        self._txn_topic = None
        txn_topic_exists = await asyncio.get_running_loop().run_in_executor(None, self._has_topic, TRANSACTION_TOPIC)
        if txn_topic_exists:
            self._txn_topic = asyncio.ensure_future(self._ensure_transaction_topic())
            await self._txn_topic
        self._share_topic = None
        share_topic_exists = await asyncio.get_running_loop().run_in_executor(None, self._has_topic,
                                                                              SHARE_STATE_TOPIC)
        if share_topic_exists:
            self._share_topic = asyncio.ensure_future(self._ensure_share_topic())
            await self._share_topic
        # A note to a worker that is not up yet is dropped (a broker's start elects its
        # coordinator while its workers boot); each has answered a call by now.
        self._tell_epoch()
        groups_before = len(self.coordinator.groups)
        # Each partition's entries apart: a transaction marker ends its producer's
        # transaction in its own partition only.
        loaded: list[tuple[int, list[Any]]] = []
        for partition in range(self.offsets_log.partitions):
            loaded.append((partition, await self._read_partition(self.offsets_log, partition)))
        self.coordinator.load(loaded)
        self.coordinator.loading = False
        self.coordinator.active = not self.suspended
        log.info("coordinator: loaded %d records, %d groups (had %d)", sum(len(entries) for _p, entries in loaded),
                 len(self.coordinator.groups), groups_before)
        txn_entries: list[tuple[Any, Any]] = []
        for partition in range(self.txn_log.partitions if txn_topic_exists else 0):
            txn_entries.extend(await self._read_partition(self.txn_log, partition))
        # Every transaction found prepared gets its markers and its completion written now
        # (the group coordinator, loaded first, is told of each marker on its partitions).
        self.transactions.load(txn_entries, self.elected_epoch)
        self.transactions.active = not self.suspended
        log.info("coordinator: loaded %d __transaction_state records, %d transactional ids", len(txn_entries),
                 len(self.transactions.transactions))
        share_entries: list[tuple[Any, Any]] = []
        for partition in range(self.share_log.partitions if share_topic_exists else 0):
            share_entries.extend(await self._read_partition(self.share_log, partition))
        self.share_state.load(share_entries)
        self.share_state.loading = False
        self.share_state.active = not self.suspended
        log.info("coordinator: loaded %d __share_group_state records, %d share-partitions", len(share_entries),
                 len(self.share_state.states))

    def _has_topic(self, topic: str) -> bool:
        self.registry.refresh()
        return self.registry.get(topic) is not None

    async def _ensure_transaction_topic(self) -> None:
        await self._ensure_internal_topic(self.txn_log, self.config.get_int("transaction.state.log.replication.factor"),
                                          lambda factor: transaction_topic_configs(self.config, factor))

    async def _transaction_topic_ready(self) -> bool:
        """__transaction_state is created by the first write to it, as Kafka creates it on the
        first transactional request, not at election: a cluster whose clients never use
        transactions keeps no 50 partitions (their files, maps and descriptors) for them.
        Concurrent first writes wait for one creation; a failed one is tried again by the next."""
        if self._txn_topic is None or (self._txn_topic.done() and (self._txn_topic.cancelled()
                                                                    or self._txn_topic.exception() is not None)):
            self._txn_topic = asyncio.ensure_future(self._ensure_transaction_topic())
        try:
            await asyncio.shield(self._txn_topic)
        except Exception as exc:
            log.warning("coordinator: cannot create %s: %s", TRANSACTION_TOPIC, exc)
            return False
        return True

    async def _ensure_share_topic(self) -> None:
        await self._ensure_internal_topic(
            self.share_log, self.config.get_int("share.coordinator.state.topic.replication.factor"),
            lambda factor: share_state_topic_configs(self.config, factor))

    async def _share_topic_ready(self) -> bool:
        """__share_group_state is created when a broker first looks for a share coordinator or
        the first share-partition is initialized, as Kafka creates it, never at election."""
        if self._share_topic is None or (self._share_topic.done() and (self._share_topic.cancelled()
                                                                        or self._share_topic.exception() is not None)):
            self._share_topic = asyncio.ensure_future(self._ensure_share_topic())
        try:
            await asyncio.shield(self._share_topic)
        except Exception as exc:
            log.warning("coordinator: cannot create %s: %s", SHARE_STATE_TOPIC, exc)
            return False
        return True

    async def _read_partition(self, topic_log: WorkerTopicLog, partition: int) -> list[tuple[Any, Any]]:
        """A partition's records; while its leader is down (this process, as controller,
        is electing another) or moving, try again rather than resign."""
        retriable = {ErrorCode.coordinator_not_available, ErrorCode.not_leader_or_follower,
                     ErrorCode.leader_not_available, ErrorCode.network_exception, ErrorCode.request_timed_out,
                     ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                     ErrorCode.coordinator_load_in_progress}
        while True:
            try:
                return await topic_log.read_partition(partition)
            except KafkaError as exc:
                if exc.code not in retriable or self._session_lost.is_set() or self.stopping.is_set():
                    raise
                log.info("coordinator: %s-%d not readable yet (%s); trying again", topic_log.topic, partition, exc)
            await asyncio.sleep(0.5)
            await asyncio.get_running_loop().run_in_executor(None, self.registry.refresh)
            await self._refresh_caches()

    async def _ensure_internal_topic(self, topic_log: WorkerTopicLog, wanted: int,
                                     configs: Callable[[int], dict[str, str]]) -> None:
        """Create __consumer_offsets, __transaction_state or __share_group_state if it is missing, with ``wanted``
        replicas (its replication factor setting); ``configs`` gives its topic configs for
        the replication factor it gets."""
        from coordination.topics import TopicRegistryError

        topic = topic_log.topic
        self.registry.refresh()
        if self.registry.get(topic) is None:
            try:
                # The setting's replication factor, or as many brokers as are alive when it
                # is created (a cluster is usable from its first broker; Kafka would wait).
                factor = max(1, min(wanted, len(self.opened.live_brokers()))) if self.zookeeper else 1
                if factor < wanted:
                    log.warning("coordinator: creating %s with replication factor %d: only %d brokers are alive "
                                "(its replication factor setting is %d)", topic, factor, factor, wanted)
                await asyncio.get_running_loop().run_in_executor(
                    None, lambda: self.registry.create(topic, topic_log.partitions, configs(factor),
                                                     replication_factor=factor))
            except TopicRegistryError as exc:
                if exc.code != ErrorCode.topic_already_exists:
                    raise
        self.registry.refresh()
        info = self.registry.get(topic)
        if info is not None and info.partitions != topic_log.partitions:
            log.warning("%s has %d partitions (its num.partitions setting says %d): using %d",
                        topic, info.partitions, topic_log.partitions, info.partitions)
            topic_log.partitions = info.partitions
        # Every owner creates its partitions' logs before the first read.
        for link in topic_log.links:
            await link.sync_registry()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.coordinator.tick()
                self.transactions.tick()
            except Exception:
                log.exception("coordinator tick failed")

    async def _refresh_topics(self) -> None:
        """Keep the topic registry current (off the loop), so consumer groups see topics
        appear, go and grow: subscriptions by regular expression resolve again and targets
        are recomputed on the members' next heartbeats."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(TOPIC_REFRESH_SECONDS)
            if self.topics is not None and self.coordinator.active:
                try:
                    await loop.run_in_executor(None, self.topics.refresh)
                except Exception as exc:
                    log.warning("coordinator: cannot refresh the topic registry: %s", exc)
                    continue
                await self._forget_deleted_topics()

    async def _forget_deleted_topics(self) -> None:
        """The share-partitions of deleted topics go: every share-partition was initialized
        on a topic the registry had, so one whose topic id it no longer has was deleted."""
        if not self.share_state.active:
            return
        deleted = self.share_state.topic_ids() - {info.topic_id for info in self.registry.all()}
        if deleted:
            forgotten = await self.share_state.forget_topics(deleted)
            if forgotten:
                log.info("coordinator: forgot the share state of %d share-partitions of deleted topics", forgotten)

    async def _heartbeat(self) -> None:
        while True:
            self.heartbeat.beat()
            self.offsets_log.files.sweep()  # cached fds of deleted (compacted) segments
            self.txn_log.files.sweep()
            self.share_log.files.sweep()
            if os.getppid() != self.parent:
                log.error("coordinator: supervisor is gone, stopping")
                self.stopping.set()
                return
            await asyncio.sleep(0.5)


def _log_failure(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:  # a deposed coordinator's mirror write is refused: expected
        log.info("group mirror write %s%r not done: %s", getattr(fn, "__name__", fn), args[:1], exc)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def run_coordinator(config: BrokerConfig, workers: int, run_dir: str, rings: SharedRings,
                    heartbeat: HeartbeatSlot, cluster_id: str, metrics_listener: socket.socket | None = None) -> int:
    from setproctitle import setproctitle

    setproctitle(f"castle[{config.node_id}]: coordinator")
    set_role("coordinator")
    import uvloop

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    process = CoordinatorProcess(config, workers, run_dir, rings, heartbeat, cluster_id)
    if metrics_listener is not None:
        from broker.process.metrics import CastleCollector, serve_metrics

        serve_metrics(metrics_listener, CastleCollector(run_dir, process.committed_offsets))
    freeze_long_lived()
    try:
        return loop.run_until_complete(process.serve())
    finally:
        loop.close()
