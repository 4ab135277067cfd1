"""A follower's side of replication: fetch from each leader, append what it sends as it is.

Each worker fetches the partitions it owns and follows (``Replication.followed``), with
``num.replica.fetchers`` loops per leader broker, each over its own connection
(broker/partitions/remote_partition.py), as Kafka runs that many ReplicaFetcherThreads per
source broker: a partition goes to loop ``Utils.abs(31 * topic.hashCode() + partition) % n``
(Kafka's AbstractFetcherManager.getFetcherId). While one loop appends what it got, another's
Fetch can be out at the leader (on two shared cores it measured no faster: docs/BENCHMARKS.md).
A round is one Fetch v15 naming each partition with the follower's log end (``fetch_offset``),
the epoch of its last batch (``last_fetched_epoch``: the leader answers DivergingEpoch when the logs part there) and
the leader epoch it knows (``current_leader_epoch``: a deposed leader answers
FENCED_LEADER_EPOCH). The leader's batches are appended byte for byte with their offsets
and epochs (PartitionLog.append_as_follower), and the follower's high watermark follows
the leader's.

Truncation (KIP-101/KIP-279 as KIP-595 does it in the fetch): with DivergingEpoch (e, o)
the follower cuts its log at min(o, where its own epoch e ends) and fetches again; when
its own last epoch below e is older, that takes more than one round, which the next
fetch's LastFetchedEpoch drives. OFFSET_OUT_OF_RANGE (the leader's log starts after ours
ends, or ends before our offset) restarts the log at the leader's start, or cuts it to
the leader's high watermark.

Replication throttle (KIP-73, broker/partitions/replication_throttle.py): while the broker's
follower rate is over, the partitions its follower.replication.throttled.replicas lists name
and that are not caught up are left out of the fetch; with no follower rate set, the round
tests one attribute.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from typing import TYPE_CHECKING, Callable

from broker.partitions.remote_partition import RemotePartitionClient
from broker.partitions.replication import Followed, Replication
from broker.partitions.replication_throttle import ReplicaThrottle
from broker.protocol import replica_fetch
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.replica_fetch import FetchPosition, PartitionData
from coordination.java_hash import java_abs, java_int, java_string_hash
from storage.errors import LogDirOfflineError, StorageError
from storage.log import PartitionLog
from storage.types import TopicPartition

if TYPE_CHECKING:
    from broker.security.inter_broker import ClientSecurity

log = logging.getLogger(__name__)

FOLLOWER_CLIENT_ID = "castle-replica-fetcher"


# Every round places each followed partition: a topic's hash (a Python loop over its name)
# is computed once.
_topic_hash = functools.lru_cache(maxsize=4096)(java_string_hash)


def fetcher_id(tp: TopicPartition, fetchers: int) -> int:
    """The loop of ``fetchers`` that fetches ``tp`` (Kafka's getFetcherId, in Java ints)."""
    return java_abs(java_int(31 * _topic_hash(tp.topic) + tp.partition)) % fetchers


class ReplicaFetcher:
    def __init__(self, node_id: int, replication: Replication, log_for: Callable[[TopicPartition], PartitionLog | None],
                 topic_id: Callable[[str], uuid.UUID | None], address_of: Callable[[int], tuple[str, int] | None],
                 settings: Callable[[str], int], on_appended: Callable[[TopicPartition], None],
                 security: "ClientSecurity | None" = None) -> None:
        self.node_id = node_id
        self.security = security  # how to reach leaders (inter.broker.listener.name)
        self._replication = replication
        self._log_for = log_for
        self._topic_id = topic_id
        self._address_of = address_of
        self._get_int = settings  # config.get_int; so named, the settings test checks its reads
        self._on_appended = on_appended
        # An I/O error appending the leader's batches fails the log's dir (the worker's Owner.fail_dir_of).
        self.dir_failed: Callable[[TopicPartition, str], None] = lambda _tp, _why: None
        self._loops: dict[tuple[int, int], asyncio.Task[None]] = {}  # by (leader, fetcher id)
        # The broker's follower replication throttle; None while follower.replication.throttled.rate
        # is unbounded. While set: the partitions the last answer showed caught up (Kafka's
        # isReplicaInSync: no lag behind the leader's high watermark), which it never holds back.
        self.throttle: ReplicaThrottle | None = None
        self._in_sync: set[TopicPartition] = set()
        self._closed = False
        replication.on_followed_changed = self.update

    def update(self) -> None:
        """Start a loop for each leader and fetcher id we now follow partitions of; loops
        with nothing left to fetch end by themselves."""
        if self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # opening, before the loop runs: WorkerNode.start() calls again
        fetchers = self._get_int("num.replica.fetchers")
        keys = {(f.leader, fetcher_id(tp, fetchers)) for tp, f in self._replication.followed.items() if f.leader >= 0}
        self._in_sync.intersection_update(self._replication.followed)
        for key in keys:
            task = self._loops.get(key)
            if task is None or task.done():
                leader, fetcher = key
                self._loops[key] = loop.create_task(self._run(leader, fetcher), name=f"replica-fetcher-{leader}-{fetcher}")

    def _partitions_from(self, leader: int, fetcher: int) -> dict[TopicPartition, Followed]:
        fetchers = self._get_int("num.replica.fetchers")
        followed = self._replication.followed
        if fetchers == 1:  # the default: every partition is loop 0's, no placement to compute each round
            return {tp: f for tp, f in followed.items() if f.leader == leader}
        return {tp: f for tp, f in followed.items() if f.leader == leader and fetcher_id(tp, fetchers) == fetcher}

    async def _run(self, leader: int, fetcher: int) -> None:
        client: RemotePartitionClient | None = None
        address: tuple[str, int] | None = None
        backoff = self._get_int("replica.fetch.backoff.ms") / 1000
        try:
            while not self._closed:
                partitions = self._partitions_from(leader, fetcher)
                if not partitions:
                    return
                wanted = self._address_of(leader)
                if wanted is None:
                    await asyncio.sleep(backoff)  # the leader is not registered (yet, or any more)
                    continue
                if client is None or wanted != address:
                    if client is not None:
                        await client.close()
                    address = wanted
                    wait_ms = self._get_int("replica.fetch.wait.max.ms")
                    client = RemotePartitionClient(address[0], address[1], FOLLOWER_CLIENT_ID,
                                                   timeout=max(10.0, wait_ms / 1000 + 10), security=self.security)
                try:
                    if not await self._round(client, partitions):
                        await asyncio.sleep(backoff)
                except KafkaError as exc:
                    log.info("fetching from broker %d: %s", leader, exc)
                    await asyncio.sleep(backoff)
                except Exception:
                    log.exception("fetching from broker %d failed", leader)
                    await asyncio.sleep(backoff)
        finally:
            if client is not None:
                await client.close()

    async def _round(self, client: RemotePartitionClient, partitions: dict[TopicPartition, Followed]) -> bool:
        """One Fetch; False when it should back off (every partition answered an error)."""
        topics: dict[uuid.UUID, list[FetchPosition]] = {}
        names: dict[tuple[uuid.UUID, int], TopicPartition] = {}
        partition_bytes = self._get_int("replica.fetch.max.bytes")
        throttle = self.throttle
        over: bool | None = None  # the follower rate, measured once per round if needed
        for tp, followed in partitions.items():
            if throttle is not None and tp not in self._in_sync and throttle.throttled(tp):
                if over is None:
                    over = throttle.exceeded()
                if over:
                    continue  # Kafka's shouldFollowerThrottle: left out of this fetch
            partition_log = self._log_for(tp)
            topic_id = self._topic_id(tp.topic)
            if partition_log is None or partition_log.offline or topic_id is None:
                # An offline log (its dir failed) fetches no more, as Kafka removes it from its
                # fetchers: fetching at its old end, it would look caught up to the new leader
                # and rejoin the ISR without a log.
                continue
            topics.setdefault(topic_id, []).append(FetchPosition(
                tp.partition, followed.epoch, partition_log.log_end_offset, partition_log.epochs.latest_epoch,
                partition_log.log_start_offset, partition_bytes))
            names[(topic_id, tp.partition)] = tp
        if not topics:
            return False
        answer = await client.fetch_as_replica(replica_fetch.encode_request(
            self.node_id, self._get_int("replica.fetch.wait.max.ms"), 1,
            self._get_int("replica.fetch.response.max.bytes"), topics))
        if answer.error_code:
            raise KafkaError(answer.error_code, "the leader refused the fetch")
        progressed = False
        for topic in answer.responses:
            for data in topic.partitions:
                asked = names.get((topic.topic_id, data.partition_index))
                if asked is None or self._replication.followed.get(asked) != partitions.get(asked):
                    continue  # not asked, or our role changed while the fetch was out
                progressed |= self._apply(asked, data)
                if throttle is not None:
                    self._throttle_accounting(throttle, asked, data)
        return progressed

    def _throttle_accounting(self, throttle: ReplicaThrottle, tp: TopicPartition, data: PartitionData) -> None:
        """The bytes received of a throttled partition count towards the follower rate (in sync or
        not, as Kafka's processPartitionData records them); note whether the partition caught up."""
        records = data.records
        if records and throttle.throttled(tp):
            throttle.record(len(records))
        partition_log = self._log_for(tp)
        if not data.error_code and partition_log is not None and partition_log.log_end_offset >= data.high_watermark:
            self._in_sync.add(tp)
        else:
            self._in_sync.discard(tp)

    def _apply(self, tp: TopicPartition, data: PartitionData) -> bool:
        partition_log = self._log_for(tp)
        if partition_log is None:
            return False
        code = data.error_code
        if code == ErrorCode.offset_out_of_range:
            self._out_of_range(tp, partition_log, data)
            return True
        if code:
            # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH: our view or the
            # leader's is behind; the state znode's watch brings the change.
            log.debug("%s: the leader answered error %d", tp, code)
            return False
        diverging = data.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            self._truncate_diverged(tp, partition_log, int(diverging.epoch), int(diverging.end_offset))
            return True
        records = data.records
        try:
            if records:
                info = partition_log.append_as_follower(records)
                if info is not None:
                    self._on_appended(tp)
        except StorageError as exc:
            log.error("%s: cannot append the leader's batches: %s", tp, exc)
            if isinstance(exc, LogDirOfflineError):
                self.dir_failed(tp, str(exc))
            return False
        partition_log.advance_high_watermark(min(int(data.high_watermark), partition_log.log_end_offset))
        return True

    def _truncate_diverged(self, tp: TopicPartition, partition_log: PartitionLog, epoch: int, end_offset: int) -> None:
        ours, our_end = partition_log.epochs.end_offset_for(epoch, partition_log.log_end_offset)
        target = min(end_offset, our_end) if ours == epoch else our_end
        if target < 0 or ours < 0:
            target = min(end_offset, partition_log.log_end_offset)
        target = max(target, partition_log.log_start_offset)
        log.warning("%s: log diverges from the leader's after epoch %d (leader's end %d): truncating %d -> %d",
                    tp, epoch, end_offset, partition_log.log_end_offset, target)
        partition_log.truncate_to(target)

    def _out_of_range(self, tp: TopicPartition, partition_log: PartitionLog, data: PartitionData) -> None:
        leader_start, leader_hw = int(data.log_start_offset), int(data.high_watermark)
        if partition_log.log_end_offset < leader_start:
            log.warning("%s: the leader's log starts at %d, after ours ends (%d): starting over there", tp,
                        leader_start, partition_log.log_end_offset)
            partition_log.truncate_fully_and_start_at(leader_start)
        elif leader_hw >= 0 and partition_log.log_end_offset > leader_hw:
            log.warning("%s: our log end %d is past the leader's: truncating to its high watermark %d", tp,
                        partition_log.log_end_offset, leader_hw)
            partition_log.truncate_to(max(leader_hw, partition_log.log_start_offset))

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._loops.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
