"""WorkerNode: the state one worker process serves from, and its peers and stats.

Partition ownership is a pure function of (topic, partition, worker count): see
broker/partitions/placement.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
import uuid
from typing import Any, Callable, Iterator, Mapping, TypeVar

import orjson

from broker.apis.share_sessions import ShareSessions
from broker.apis.txn_produce import ADDS_PARTITIONS_FROM
from broker.config import BrokerConfig
from broker.context import RequestContext
from broker.coordinator.forwarded import Forwarded, RequestBody
from broker.dynamic_configs import DYNAMIC, LOG_DEFAULTS, REPLICATION_RATES, DynamicBrokerConfigs
from broker.links import log_dir_codec, peer_codec
from broker.links.mesh import Mesh, Op, Parts, PeerUnavailable
from broker.links.remote_ops import RemotePartitionOps, serve_partition_ops
from broker.links.rings import SharedRings
from broker.logger_levels import BrokerLoggers
from broker.network.connection_quotas import ConnectionQuotas
from broker.network.segment_files import SegmentFiles
from broker.partitions.owner import Owner
from broker.partitions.partition_ops import PartitionOps
from broker.partitions.placement import owner_index
from broker.partitions.purgatory import FetchPurgatory
from broker.partitions.replica_fetcher import ReplicaFetcher
from broker.partitions.replication import Replication
from broker.partitions.replication_throttle import ReplicationThrottles
from broker.partitions.share_partitions import SharePartitions, ShareSettings
from broker.process import gc_freeze
from broker.process.group_configs import open_group_configs
from broker.process.heartbeats import HeartbeatSlot
from broker.process.metrics import WorkerMetrics
from broker.process.reload import apply_in_child
from broker.process.share_persister import SharePersister
from broker.process.txn_verifier import TxnVerifier
from broker.protocol.errors import ErrorCode, KafkaError, ProtocolViolation
from broker.quotas import connection_counts, replication_rates, shared_counters
from broker.quotas.book import QuotaBook
from broker.security.broker_security import BrokerSecurity
from broker.security.delegation_tokens import start_delegation_tokens
from broker.security.inter_broker import inter_broker_security
from broker.telemetry.service import WorkerTelemetry
from coordination.finalized_features import TRANSACTION_VERSION, FinalizedFeatures, default_levels
from coordination.open_backend import open_broker_backend
from coordination.snapshot import ClusterSnapshot, PartitionView
from coordination.topics import TopicInfo
from coordination.znodes import PartitionState
from storage import files
from storage.config import LogConfig
from storage.log import AppendInfo
from storage.manager import LogManager, ManagerConfig
from storage.mmap_file import PopulateClock
from storage.releaser import RELEASER
from storage.types import TopicPartition

log = logging.getLogger(__name__)

FIND_TRANSACTIONS = b"\x01"  # a FIND's body when a client asked for a transaction coordinator
FIND_SHARE = b"\x02"  # a FIND's body when a broker asked for a share coordinator
T = TypeVar("T")

JOIN_GROUP = 11
COORDINATOR_CALL_TIMEOUT = 60.0
JOIN_CALL_TIMEOUT = float(2**31 // 1000)  # a rebalance timeout is an int32 of milliseconds
# How long a request waits for a coordinator process the supervisor is restarting (it is
# respawned after 0.1 s, more after repeated deaths, and serves about half a second later on
# an idle machine; a loaded one has taken over 5 s to import and start a Python process, and a
# client's request timeout is 30 s).
COORDINATOR_RESTART_WAIT = 10.0

HOUSEKEEPING_S = 0.5
# Housekeeping runs every HOUSEKEEPING_S; cached segment fds of deleted files are closed every
# 2 s (an fstat per cached file, up to 2,048).
SWEEP_EVERY_TICKS = 4
# AlterReplicaLogDirs copies at most this much per housekeeping tick into the future logs
# (32 MiB/s; less under replica.alter.log.dirs.io.max.bytes.per.second): on the loop thread,
# whose requests wait meanwhile.
MOVE_BYTES_PER_TICK = 16 << 20


class WorkerNode:
    def __init__(self, config: BrokerConfig, index: int, count: int, run_dir: str, cluster_id: str,
                 clean_shutdown: bool, rings: SharedRings) -> None:
        self.config = config
        self.index = index
        self.count = count
        self.run_dir = run_dir
        self.cluster_id = cluster_id
        self.node_id = config.node_id
        # Topics, partition holders, live brokers, the coordinator epoch: from the data
        # dir (local backend) or ZooKeeper (zookeeper.connect).
        self.cluster = ClusterSnapshot(open_broker_backend(config), config.listeners.advertised)
        self.registry = self.cluster.registry
        self.registry.refresh()
        # TLS contexts, SASL mechanisms and the SCRAM credentials its connections check.
        self.security = BrokerSecurity(config)
        secret = self.cluster.broker_secret()
        client_security = inter_broker_security(config, secret)  # how replica fetchers reach leaders
        self.security.set_broker_secret(secret, client_security)
        if any(listener.sasl for listener in config.listeners.bound):
            self.security.watch_credentials(self.cluster.credentials())
        if self.security.authorizer_on:
            self.security.watch_acls(self.cluster.acls())
        self.security.tokens = start_delegation_tokens(config, self.cluster.delegation_tokens(), expirer=index == 0)
        # Groups' configs (consumer.session.timeout.ms, share.record.lock.duration.ms, ...),
        # read per request from a cache the store's watch keeps fresh.
        self.group_configs = open_group_configs(config, self.cluster.group_configs())
        # Client telemetry (KIP-714): the client-metrics subscriptions, followed like the groups' configs.
        self.telemetry = WorkerTelemetry(self.cluster.client_metrics(), config.get_int("telemetry.max.bytes"))
        self.telemetry.start()
        # The finalized feature levels (transaction.version is read per transactional Produce).
        self.features = FinalizedFeatures(self.cluster.features(), default_levels(config.get_int("transaction.version")))
        self.features.start()
        # Client quotas, measured across the workers in the memory the supervisor shared.
        self.quotas = QuotaBook(shared_counters.inherited(index, count, config.get_int("quota.window.num"),
                                                          config.get_int("quota.window.size.seconds") * 1000))
        self.quotas.follow(self.cluster.client_quotas())
        # Replication throttles (KIP-73): the broker's replication rates, measured across the workers.
        self.replication_throttles = ReplicationThrottles(
            self.node_id, replication_rates.inherited(index, count, replication_rates.windows_of(config.get_int)),
            self._topic_configs)
        self.replication_throttles.set_rates(config.value)
        # Connection limits (max.connections*, the ips quotas), counted across the workers.
        counts, rates = connection_counts.inherited(index, count, config.get_int("quota.window.num"),
                                                    config.get_int("quota.window.size.seconds") * 1000)
        self.connection_quotas = ConnectionQuotas(counts, rates,
                                                  connection_counts.AdmissionLock(os.path.join(run_dir, "connections.lock")),
                                                  config.listeners.bound, config.listeners.inter_broker)
        self.connection_quotas.configure(config)
        self.connection_quotas.follow_ip_quotas(self.cluster.client_quotas())
        settings = config.storage_settings()
        self.logs = LogManager(ManagerConfig.from_broker_config(settings), LogConfig.from_broker_config(settings),
                               {t.name: t.configs for t in self.registry.all()},
                               owns=self.owns, clean_shutdown=clean_shutdown)
        # Dynamic broker configs (kafka-configs --entity-type brokers): the store's watch hands
        # new values to the reader's thread; housekeeping applies them on the loop.
        self._dynamic_pending: dict[str, Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # once running: changes are applied at once
        self.dynamic_configs = DynamicBrokerConfigs(self.cluster.broker_configs(), config, self._dynamic_changed)
        self.dynamic_configs.start()
        self.apply_dynamic()
        # Logger levels (kafka-configs --entity-type broker-loggers), shared by the broker's processes.
        self.loggers = BrokerLoggers(run_dir)
        self.loggers.start()
        self.owner = Owner(index, self.logs, self.registry, self.owns, self._appended, self.fence_epoch,
                           self._make_replication, self._owned_views, self._assigned_elsewhere, self._verifies)
        self.replica_fetcher = ReplicaFetcher(self.node_id, self.owner.replication, self.owner.log_for,
                                              self._topic_id, self._broker_address, config.get_int,
                                              self._wake, client_security)
        # The other processes of this broker, over the shared-memory rings: the workers'
        # partition ops, and the coordinator process (endpoint ``count``).
        self.mesh = Mesh(rings, index)
        self.owner.before_moves = self._reload_dynamic
        serve_partition_ops(self.mesh, self.owner)
        self.mesh.handlers[Op.SYNC_REGISTRY] = self._sync_asked
        self.mesh.notes[Op.APPENDED] = self._appended_elsewhere
        self.mesh.notes[Op.LOG_DIR_FAILED] = self._dir_failed_elsewhere
        self.owner.dir_failed = self._dir_failed
        self.replica_fetcher.dir_failed = self.owner.fail_dir_of
        self.replication_throttles.on_change = self._throttles_changed
        self._throttles_changed()
        self.mesh.notes[Op.EPOCH] = lambda body: self.cluster.learn_epoch(peer_codec.decode_epoch(body))
        self.coordinator_endpoint = rings.coordinator
        self._remote = {i: RemotePartitionOps(self.mesh, i) for i in range(count) if i != index}
        self._ops: list[PartitionOps] = [self._remote.get(i, self.owner) for i in range(count)]
        self.txn_verifier = TxnVerifier(self.node_id, self.mesh, self.coordinator_endpoint, self.find_coordinator,
                                        client_security)
        # The share coordinator's client: the share-partition leaders' durable state (KIP-932).
        self.share_persister = SharePersister(self.node_id, self.mesh, self.coordinator_endpoint,
                                              lambda: self.find_coordinator(share=True), client_security)
        self.purgatory = FetchPurgatory()
        self.segment_files = SegmentFiles()
        # Share groups (KIP-932): this worker's share sessions, and the share partitions it leads.
        self.share_sessions = ShareSessions(config.get_int("group.share.max.share.sessions"))
        self.owner.shares = SharePartitions(self.owner, self.share_persister, self.share_settings)
        self._producer_ids: Iterator[int] = iter(())
        self._admin = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="admin")
        self.stats: dict[str, int] = {"connections": 0, "requests": 0, "produce_requests": 0,
                                      "fetch_requests": 0, "records_appended": 0,
                                      "forwards": 0, "quota_throttled_produce": 0, "quota_throttled_fetch": 0,
                                      "quota_throttled_request": 0}
        self.metrics = WorkerMetrics(index)
        self.connections: set[Any] = set()  # the worker server's open client connections
        self.started = time.time()
        self._closed = False
        self._stats_written = b""  # the stats file's last contents (write_stats)
        self._fencing: "asyncio.Future[None] | None" = None  # the offline replicas' ISR exit under way

    def share_settings(self, group_id: str) -> ShareSettings:
        """A share group's share partition settings: its group configs, else the broker's."""
        get = self.group_configs.group_config
        return ShareSettings(str(get(group_id, "share.auto.offset.reset")), int(get(group_id, "share.record.lock.duration.ms")),
                             int(get(group_id, "share.delivery.count.limit")),
                             int(get(group_id, "share.partition.max.record.locks")))

    def start(self) -> None:
        """On the running loop: serve the other processes' calls, and apply registry
        changes that a reader thread loaded (ZooKeeper) as soon as they are loaded."""
        loop = asyncio.get_running_loop()
        self.mesh.start()

        def loaded() -> None:  # on the reader thread
            loop.call_soon_threadsafe(self._registry_loaded)

        self.cluster.on_change = loaded

        def dir_failed_off_loop(path: str) -> None:  # on the flusher's or the block releaser's thread
            try:
                loop.call_soon_threadsafe(self._dir_failed_found_by_logs, path)
            except RuntimeError:
                pass  # the loop closed: the worker is stopping, there is no one left to tell

        self.logs.on_dir_failed = dir_failed_off_loop
        self._loop = loop
        self.replica_fetcher.update()  # the partitions open() found us following

    # ------------------------------------------------------------------ replication
    def _make_replication(self, owner: Owner) -> Replication:
        return Replication(self.node_id, owner.log_for, self._write_isr, self._wake,
                           lambda: self.config.get_int("replica.lag.time.max.ms"))

    def _owned_views(self) -> Iterator[tuple[TopicPartition, PartitionView]]:
        """The partitions this worker owns, with what the cluster records of each."""
        for info in self.registry.all():
            for partition, view in self.cluster.partitions_of(info.name).items():
                tp = TopicPartition(info.name, partition)
                if self.node_id in view.replicas and owner_index(tp, self.count) == self.index:
                    yield tp, view

    def _verifies(self, produce_version: int) -> bool:
        """A transactional batch is verified before it opens a transaction: always for a
        producer that adds partitions this way (transaction.version 2), else as configured."""
        config = self.config
        return (config.get_bool("transaction.partition.verification.enable")
                or (produce_version >= ADDS_PARTITIONS_FROM and self.features.level(TRANSACTION_VERSION) >= 2))

    def _assigned_elsewhere(self, tp: TopicPartition) -> bool:
        """The cluster records ``tp``'s replicas, and this broker is not one of them."""
        view = self.cluster.partition(tp.topic, tp.partition)
        return view is not None and self.node_id not in view.replicas

    def _write_isr(self, tp: TopicPartition, state: PartitionState) -> "asyncio.Future[PartitionState | None]":
        return asyncio.ensure_future(
            self.run_admin(lambda: self.cluster.update_partition_state(tp.topic, tp.partition, state)))

    def _topic_id(self, name: str) -> uuid.UUID | None:
        info = self.registry.get(name)
        return None if info is None else info.topic_id

    def _broker_address(self, broker: int) -> tuple[str, int] | None:
        """Where ``broker`` takes other brokers' connections (inter.broker.listener.name)."""
        return self.cluster.live_brokers().get(broker, {}).get(self.config.listeners.inter_broker)

    def _sync_asked(self, _body: memoryview) -> "asyncio.Future[Parts]":
        """Another process changed the registry and waits for us to have its change: load
        it off the loop first (with ZooKeeper the watch may not have fired yet), then sync."""
        async def sync() -> Parts:
            await self.run_admin(lambda: None)
            self.owner.sync_registry()
            return []

        return asyncio.ensure_future(sync())

    def _registry_loaded(self) -> None:
        # Whoever calls refresh() first takes its "changed"; the owner syncs regardless.
        if not self._closed:  # a load that lands while the worker stops finds its logs closed
            self.owner.sync_registry()

    def open(self) -> None:
        self.logs.open()
        self.owner.sync_registry()
        self.logs.start_flusher()

    # ------------------------------------------------------------------ ownership
    def owner_of(self, tp: TopicPartition) -> int:
        return owner_index(tp, self.count)

    def ops_for(self, worker: int) -> PartitionOps:
        """Worker ``worker``'s partition ops: ours, or a proxy over the rings."""
        ops = self._ops[worker]
        if worker != self.index:
            self.stats["forwards"] += 1
        return ops

    def owns(self, tp: TopicPartition) -> bool:
        """This worker writes ``tp``: this broker is one of its replicas (leader or
        follower) and it maps to this worker."""
        if owner_index(tp, self.count) != self.index:
            return False
        view = self.cluster.partition(tp.topic, tp.partition)
        return view is not None and self.node_id in view.replicas

    def holds(self, tp: TopicPartition) -> bool:
        """This broker holds ``tp`` (is its leader); other brokers' partitions answer
        NOT_LEADER_OR_FOLLOWER."""
        return self.cluster.holder_of(tp.topic, tp.partition) == self.node_id

    def topic(self, name: str) -> TopicInfo | None:
        info = self.registry.get(name)
        if info is None and self.registry.refresh():
            info = self.registry.get(name)
        return info

    # ------------------------------------------------------------------ long-poll wakeups
    def _appended(self, tp: TopicPartition, info: AppendInfo) -> None:
        """Called by the owner after each append: count it, wake local and remote long-polls."""
        self.stats["records_appended"] += info.record_count
        self.metrics.appended(tp.topic, info.size, info.record_count)
        self._wake(tp)

    def _wake(self, tp: TopicPartition) -> None:
        """New records at ``tp`` (appended, or committed when the high watermark moved):
        wake the fetches parked on it here and in other workers."""
        self.purgatory.wake(tp)
        watchers = self.owner.remote_watchers.pop(tp, None)
        if watchers:
            parts = peer_codec.encode_tps([tp])
            for worker in watchers:
                self.mesh.note(worker, Op.APPENDED, parts)

    def _dir_failed(self, path: str) -> None:
        """This worker found log dir ``path`` failed: the others take it offline too (the
        dir is the broker's, shared by every worker's partitions)."""
        parts = log_dir_codec.encode_failed(path)
        for worker in range(self.count):
            if worker != self.index:
                self.mesh.note(worker, Op.LOG_DIR_FAILED, parts)
        self._fence_offline(path)

    def _dir_failed_found_by_logs(self, path: str) -> None:
        if not self._closed:
            self._dir_failed(path)

    def _dir_failed_elsewhere(self, body: memoryview) -> None:
        path = log_dir_codec.decode_failed(body)
        if self.logs.fail_dir(path, "another worker of this broker found it failed"):
            self._fence_offline(path)

    def _fence_offline(self, path: str) -> None:
        """Our replicated partitions in failed dir ``path`` leave their ISRs and their
        leaderships go to the other in-sync replicas (Kafka's controller does so for the
        offline replicas a broker reports): clients are sent to a leader that can serve."""
        offline = {(tp.topic, tp.partition) for tp in self.logs.logs_in(path)
                   if (view := self.cluster.partition(tp.topic, tp.partition)) is not None and len(view.replicas) > 1}
        if not offline:
            return
        defaults = self.logs.default_log_config

        def fence() -> int:
            return self.cluster.fence_offline_replicas(
                self.node_id, offline, lambda configs: defaults.with_overrides(configs).unclean_leader_election_enable)

        async def run() -> None:
            try:
                written = await self.run_admin(fence)
                log.warning("log dir %s offline: %d of our %d replicated partitions there moved leader or ISR",
                            path, written, len(offline))
            except Exception:
                log.exception("log dir %s offline: its partitions could not leave their ISRs", path)

        self._fencing = asyncio.ensure_future(run())

    def _appended_elsewhere(self, body: memoryview) -> None:
        for tp in peer_codec.decode_tps(body):
            self.purgatory.wake(tp)

    # ------------------------------------------------------------------ topics
    async def registry_changed(self) -> None:
        """After this worker changed the registry: every worker syncs before we answer. A
        worker that is down syncs when it starts."""
        self.owner.sync_registry()
        waiting = []
        for ops in self._remote.values():
            try:
                waiting.append(ops.sync_registry())
            except PeerUnavailable:
                continue
        await asyncio.gather(*waiting, return_exceptions=True)

    async def run_admin(self, change: Callable[[], T]) -> T:
        """A change to the topic registry off the loop (ZooKeeper round trips, retries, or
        the local file's lock), then the snapshot loaded on the same thread, so that the
        answer sees the change. One thread: admin changes of this worker run in order."""
        def run() -> T:
            result = change()
            self.cluster.refresh_now()
            return result

        return await asyncio.get_running_loop().run_in_executor(self._admin, run)

    async def next_producer_id(self) -> int:
        for producer_id in self._producer_ids:
            return producer_id
        block = self.config.get_int("producer.id.block.size")
        first = await self.run_admin(lambda: self.registry.allocate_producer_ids(block))
        self._producer_ids = iter(range(first, first + block))
        return next(self._producer_ids)

    # ------------------------------------------------------------------ coordinator
    async def to_coordinator(self, ctx: RequestContext, request: RequestBody) -> bytes:
        """Hand a group or offset request, its body undecoded, to the coordinator process;
        its encoded answer; PeerUnavailable at once if the coordinator process is down or
        dies meanwhile (the supervisor marks its endpoint down when it reaps it). A JoinGroup
        may wait a whole rebalance, as long as the member's rebalance timeout: the
        coordinator bounds it."""
        connection = ctx.connection
        forwarded = Forwarded(ctx.api_key, request.api_version, ctx.client_id, f"/{connection.host}",
                              connection.auth.principal, connection.listener.name, request.body)
        timeout = JOIN_CALL_TIMEOUT if ctx.api_key == JOIN_GROUP else COORDINATOR_CALL_TIMEOUT
        await self._coordinator_restarted()
        try:
            body: bytes = await self.mesh.call(self.coordinator_endpoint, Op.SERVE, forwarded.parts(), bytes, timeout)
        except KafkaError as exc:
            # PeerUnavailable (the coordinator process is down or restarting) goes on up: the
            # API answers for itself (broker/coordinator/api.py).
            if exc.code == ErrorCode.invalid_request:  # it could not read the body: close, as Kafka does
                raise ProtocolViolation(str(exc)) from None
            raise
        return body

    async def _coordinator_restarted(self) -> None:
        """A request that comes while the coordinator process is down (the supervisor reaped it
        and starts another) waits a little for the successor rather than failing at once: an
        error makes clients drop their coordinator connection and reconnect with a growing
        backoff (librdkafka), and a consumer whose heartbeats fail for a session timeout
        leaves the group. One still down after the wait fails as before (the call raises)."""
        if not self.mesh.is_up(self.coordinator_endpoint):
            await self.mesh.wait_up(self.coordinator_endpoint, COORDINATOR_RESTART_WAIT)

    async def check_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list[TopicPartition], add: bool) -> dict[TopicPartition, int]:
        return await self.txn_verifier.check(transactional_id, producer_id, producer_epoch, partitions, add)

    async def find_coordinator(self, transactions: bool = False, share: bool = False) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the elected coordinator; ``transactions``: asked for
        a transactional id, which makes sure __transaction_state exists, as in Kafka;
        ``share``: asked for a share coordinator, which makes sure __share_group_state exists."""
        kind = FIND_TRANSACTIONS if transactions else FIND_SHARE if share else b""
        for attempt in (1, 2):
            await self._coordinator_restarted()
            try:
                return await self.mesh.call(self.coordinator_endpoint, Op.FIND, [kind], peer_codec.decode_found, 10)
            except KafkaError:
                # Sent to a process that had died but was not yet marked down: FIND asks
                # nothing of it, so ask its successor once (waiting for it as above).
                if attempt == 2 or self.mesh.is_up(self.coordinator_endpoint):
                    break
        return int(ErrorCode.coordinator_not_available), -1, "", -1

    def fence_epoch(self) -> int:
        """The current coordinator epoch (file or ZooKeeper watch; never blocks)."""
        return self.cluster.current_epoch()

    def reload_settings(self) -> None:
        """SIGHUP (broker/process/reload.py): take the supervisor's new dynamic settings."""
        changed = apply_in_child(self.config, self.run_dir)
        self.security.reload_certificates()
        if "producer.id.expiration.ms" in changed:
            self.logs.set_producer_id_expiration_ms(self.config.get_int("producer.id.expiration.ms"))
        if set(changed) - {"log.level", "producer.id.expiration.ms"}:
            self.logs.set_default_log_config(LogConfig.from_broker_config(self.config.storage_settings()))
        log.info("worker %d: reloaded%s", self.index, "".join(f" {k}={v}" for k, v in sorted(changed.items())))
        # The file's values are static ones: a dynamic value set for this broker still wins.
        self.dynamic_configs.set_static({name: self.config.value(name) for name in DYNAMIC})
        self._dynamic_pending = self.dynamic_configs.effective()
        self.apply_dynamic()

    def _reload_dynamic(self) -> None:
        """On the loop thread: read the dynamic broker configs now, not when the store's watch
        comes round (another worker may have written them a moment ago). A store that cannot
        be read (ZooKeeper away) leaves the view the watch gave: the move still starts."""
        try:
            self.dynamic_configs.refresh()
        except Exception as exc:
            log.warning("worker %d: cannot re-read the dynamic broker configs: %s", self.index, exc)
        self.apply_dynamic()

    def _dynamic_changed(self, values: dict[str, Any]) -> None:
        """From the reader's thread (or a handler's executor): applied on the loop."""
        self._dynamic_pending = values
        loop = self._loop
        if loop is not None:
            # Now, not at the next housekeeping tick: kafka-reassign-partitions sets a throttle
            # just before the move it holds back starts.
            try:
                loop.call_soon_threadsafe(self.apply_dynamic)
            except RuntimeError:
                pass  # the loop closed (shutting down)

    def apply_dynamic(self) -> None:
        """On the loop thread: take the latest dynamic broker configs the reader handed over."""
        values, self._dynamic_pending = self._dynamic_pending, None
        if values is None:
            return
        self.security.set_dynamic_tls(self.dynamic_configs.listener_tls())
        changed = {name: value for name, value in values.items() if self.config.value(name) != value}
        self.config.update(changed)
        self.connection_quotas.configure(self.config, self.dynamic_configs.per_listener())
        if not changed:
            return
        if "producer.id.expiration.ms" in changed:
            self.logs.set_producer_id_expiration_ms(self.config.get_int("producer.id.expiration.ms"))
        if set(changed) & LOG_DEFAULTS:
            self.logs.set_default_log_config(LogConfig.from_broker_config(self.config.storage_settings()))
        if set(changed) & REPLICATION_RATES:
            self.replication_throttles.set_rates(self.config.value)
        if "log.cleaner.backoff.ms" in changed:
            self.logs.set_cleaner_backoff_ms(self.config.get_int("log.cleaner.backoff.ms"))
        log.info("worker %d: dynamic broker configs%s", self.index,
                 "".join(f" {k}={v}" for k, v in sorted(changed.items())))

    def _topic_configs(self, topic: str) -> Mapping[str, str] | None:
        info = self.registry.get(topic)
        return None if info is None else info.configs

    def _throttles_changed(self) -> None:
        """The fetch paths test one attribute each: None while their side is unthrottled."""
        self.owner.leader_throttle = self.replication_throttles.leader
        self.replica_fetcher.throttle = self.replication_throttles.follower

    # ------------------------------------------------------------------ housekeeping
    async def housekeeping(self, heartbeat: HeartbeatSlot) -> None:
        """Periodic work on the loop thread (single writer): retention, checkpoints,
        cleaner, registry changes made by other processes, heartbeat, stats file."""
        stats_path = os.path.join(self.run_dir, f"worker-{self.index}.stats.json")
        ticks = 0
        while True:
            try:
                if self.registry.refresh():
                    self.owner.sync_registry()
                self.owner.replication.check_lag()
                self.apply_dynamic()
                self.connection_quotas.close_excess(self.connections)
                self.logs.run_due_tasks(include_flush=False)
                if self.logs.futures:
                    self.replication_throttles.copy_future_logs(self.logs, MOVE_BYTES_PER_TICK, HOUSEKEEPING_S)
                ticks += 1
                if ticks % SWEEP_EVERY_TICKS == 0:
                    self.segment_files.sweep()  # let deleted segments' blocks go
                self.write_stats(stats_path)
                self.telemetry.write(self.run_dir, self.index)
                self.metrics.flush(self.stats)
            except Exception:
                log.exception("housekeeping failed")
            heartbeat.beat()
            await asyncio.sleep(HOUSEKEEPING_S)

    def write_stats(self, path: str) -> None:
        # The partitions' state rides here for the metrics endpoint (broker/process/metrics.py):
        # [topic, partition, log start offset, log end offset, size in bytes].
        partitions = [[tp.topic, tp.partition, plog.log_start_offset, plog.log_end_offset, plog.size_in_bytes]
                      for tp, plog in list(self.logs.logs.items()) if self.owns(tp)]
        data = orjson.dumps(dict(self.stats, worker=self.index, pid=os.getpid(),
                                 open_connections=len(self.connections),
                                 page_populate_seconds=round(PopulateClock.seconds, 6),
                                 page_populate_bytes=PopulateClock.bytes, gc_frozen_objects=gc_freeze.frozen_objects,
                                 partitions=partitions))
        if data == self._stats_written:
            return  # an idle worker: no file to replace (a new inode, a freed one, a thread woken)
        self._stats_written = data
        # Written off the loop: the replace frees the old file's block, and on a disk
        # mounted with discard that waits for the device (storage/releaser.py). Here it
        # held the loop for 9% of a worker's time under a 1 KiB max-throughput load.
        RELEASER.submit(files.replace_file, path, data)

    def close(self) -> None:
        self._closed = True
        self.txn_verifier.close()
        self.share_persister.close()
        self.security.close()
        self.group_configs.close()
        self.telemetry.close()
        self.features.close()
        self.dynamic_configs.close()
        self.loggers.close()
        self.quotas.close()
        self.connection_quotas.close()
        self.cluster.on_change = None
        self.owner.replication.close()
        self.segment_files.close()
        self.mesh.close()
        self._admin.shutdown(wait=True)
        self.cluster.close()
        self.logs.close()

