"""What a worker knows and does as the leader or a follower of the partitions it owns.

Roles come from the cluster's records (coordination/snapshot.py's PartitionView: the
state znode the controller and the leaders write): ``apply`` runs on every change. As
leader of a partition, ``Replication`` keeps each follower's progress from its fetches,
moves the high watermark to the smallest log end in the ISR (not while the ISR is below
min.insync.replicas), answers acks=all appends
once it passes them, and shrinks or expands the ISR (written conditionally on the state
znode's version, off the loop). As follower it only records whom to fetch from; the
fetching is broker/partitions/replica_fetcher.py's.

All of it runs on the worker's loop; the owner (broker/partitions/owner.py) calls in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from broker.protocol.errors import ErrorCode
from coordination.snapshot import PartitionView
from coordination.znodes import PartitionState
from storage.log import PartitionLog
from storage.types import TopicPartition

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def epoch_fence(asked: int, current: int) -> int:
    """KIP-320: the error for a request naming leader epoch ``asked`` (-1: unchecked) when
    the leader's is ``current``: one that knows an older leader may be reading a log that
    was truncated since (FENCED_LEADER_EPOCH); one that knows a newer one is ahead of us."""
    if asked < 0 or asked == current:
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if asked < current else ErrorCode.unknown_leader_epoch


class IsrWriter(Protocol):
    def __call__(self, tp: TopicPartition, state: PartitionState) -> "asyncio.Future[PartitionState | None]": ...


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = -1  # unknown until its first fetch under this leader
    last_caught_up_ms: int = 0  # when it last had everything the leader had
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = -1


@dataclass(slots=True)
class Waiter:
    offset: int  # the high watermark it waits for
    future: "asyncio.Future[int]"
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class Led:
    """A partition this broker leads."""

    epoch: int
    replicas: list[int]
    isr: list[int]
    zk_version: int
    controller_epoch: int
    epoch_start_offset: int  # the log end when this epoch began (a follower below it is not in sync)
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    isr_write_pending: bool = False
    waiters: list[Waiter] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Followed:
    """A partition this broker follows: whom to fetch it from, in which epoch."""

    leader: int
    epoch: int


class Replication:
    def __init__(self, node_id: int, log_for: Callable[[TopicPartition], PartitionLog | None],
                 write_isr: IsrWriter, hw_advanced: Callable[[TopicPartition], None],
                 lag_time_ms: Callable[[], int]) -> None:
        self.node_id = node_id
        self._log_for = log_for
        self._write_isr = write_isr
        self._hw_advanced = hw_advanced
        self._lag_time_ms = lag_time_ms
        self.led: dict[TopicPartition, Led] = {}
        self.followed: dict[TopicPartition, Followed] = {}
        # Told when the partitions this worker follows (or their leaders) change.
        self.on_followed_changed: Callable[[], None] | None = None

    # ------------------------------------------------------------------ roles
    def apply(self, views: Iterable[tuple[TopicPartition, PartitionView]]) -> None:
        """Become leader or follower of each owned partition as its view says; forget the rest."""
        seen: set[TopicPartition] = set()
        followed_changed = False
        for tp, view in views:
            seen.add(tp)
            if view.leader == self.node_id:
                if self.followed.pop(tp, None) is not None:
                    followed_changed = True
                self._lead(tp, view)
            elif self.node_id in view.replicas:
                self._resign(tp, ErrorCode.not_leader_or_follower)
                wanted = Followed(view.leader, view.leader_epoch)
                if self.followed.get(tp) != wanted:
                    self.followed[tp] = wanted
                    followed_changed = True
                partition_log = self._log_for(tp)
                if partition_log is not None:
                    partition_log.set_replicated(True)
            else:
                self._resign(tp, ErrorCode.not_leader_or_follower)
                if self.followed.pop(tp, None) is not None:
                    followed_changed = True
        for tp in [tp for tp in self.led if tp not in seen]:
            self._resign(tp, ErrorCode.not_leader_or_follower)
        for tp in [tp for tp in self.followed if tp not in seen]:
            del self.followed[tp]
            followed_changed = True
        if followed_changed and self.on_followed_changed is not None:
            self.on_followed_changed()

    def _lead(self, tp: TopicPartition, view: PartitionView) -> None:
        partition_log = self._log_for(tp)
        if partition_log is None:
            return
        led = self.led.get(tp)
        if led is not None and led.epoch == view.leader_epoch:
            if view.zk_version > led.zk_version:  # our own ISR write, or the controller's, read back
                led.isr, led.zk_version = list(view.isr), view.zk_version
                led.controller_epoch = view.controller_epoch
            if view.replicas != led.replicas:  # a replica added (or moved): it fetches, then joins the ISR
                led.replicas = list(view.replicas)
                for broker in led.replicas:
                    if broker != self.node_id:
                        led.followers.setdefault(broker, FollowerProgress())
                partition_log.set_replicated(len(led.replicas) > 1)
            return
        end = partition_log.log_end_offset
        if led is None:
            log.info("%s: leader in epoch %d (ISR %s, log end %d, high watermark %d)", tp, view.leader_epoch, view.isr,
                     end, partition_log.high_watermark)
        now = now_ms()
        # In-sync followers count as caught up now: each gets replica.lag.time.max.ms to
        # show it, as Kafka's new leader grants.
        followers = {b: FollowerProgress(last_caught_up_ms=now if b in view.isr else 0)
                     for b in view.replicas if b != self.node_id}
        waiters = led.waiters if led is not None else []
        self.led[tp] = Led(view.leader_epoch, list(view.replicas), list(view.isr), view.zk_version,
                           view.controller_epoch, end, followers, waiters=waiters)
        partition_log.set_replicated(len(view.replicas) > 1)
        if partition_log.epochs.latest_epoch < view.leader_epoch:
            partition_log.epochs.assign(view.leader_epoch, end)
        self._maybe_advance(tp, partition_log)

    def _resign(self, tp: TopicPartition, code: int) -> None:
        led = self.led.pop(tp, None)
        if led is None:
            return
        log.info("%s: no longer leader (epoch %d)", tp, led.epoch)
        for waiter in led.waiters:
            _answer(waiter, code)

    def leader_epoch(self, tp: TopicPartition) -> int:
        """Our epoch as its leader, -1 when we do not lead it."""
        led = self.led.get(tp)
        return -1 if led is None else led.epoch

    def isr_size(self, tp: TopicPartition) -> int:
        led = self.led.get(tp)
        return 0 if led is None else len(led.isr)

    # ------------------------------------------------------------------ the leader's work
    def appended(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        """After a producer's append: alone in the ISR, the high watermark follows at once."""
        led = self.led.get(tp)
        if led is not None and partition_log.replicated:
            self._maybe_advance(tp, partition_log)

    def follower_fetched(self, tp: TopicPartition, replica: int, fetch_offset: int, partition_log: PartitionLog) -> None:
        """A follower asked for ``fetch_offset``: it has everything before it."""
        led = self.led.get(tp)
        if led is None:
            return
        progress = led.followers.get(replica)
        if progress is None:
            return
        now = now_ms()
        end = partition_log.log_end_offset
        if fetch_offset >= end:
            progress.last_caught_up_ms = now
        elif fetch_offset >= progress.leader_end_at_last_fetch >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_ms = now
        progress.leader_end_at_last_fetch = end
        progress.log_end_offset = fetch_offset
        if replica not in led.isr and fetch_offset >= partition_log.high_watermark \
                and fetch_offset >= led.epoch_start_offset:
            self._change_isr(tp, led, sorted({*led.isr, replica}, key=led.replicas.index))
        self._maybe_advance(tp, partition_log)

    def _maybe_advance(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        led = self.led.get(tp)
        if led is None:
            return
        if partition_log.replicated and len(led.isr) < partition_log.config.min_insync_replicas:
            # Too few in-sync replicas to call anything committed (Kafka 4.0, KIP-966): the
            # high watermark waits, so consumers never read what one lost broker could take.
            if led.waiters:
                self._answer_waiters(tp, led, partition_log)
            return
        mark = partition_log.log_end_offset
        for broker in led.isr:
            if broker != self.node_id:
                progress = led.followers.get(broker)
                mark = min(mark, progress.log_end_offset if progress is not None else -1)
        if mark >= 0 and partition_log.advance_high_watermark(mark):
            self._hw_advanced(tp)
        if led.waiters:
            self._answer_waiters(tp, led, partition_log)

    def _answer_waiters(self, tp: TopicPartition, led: Led, partition_log: PartitionLog) -> None:
        hw = partition_log.high_watermark
        below = len(led.isr) < partition_log.config.min_insync_replicas
        keep = []
        for waiter in led.waiters:
            if waiter.offset <= hw:
                _answer(waiter, ErrorCode.not_enough_replicas_after_append if below else ErrorCode.none)
            elif not waiter.future.done():
                keep.append(waiter)
        led.waiters = keep

    def wait_committed(self, tp: TopicPartition, offset: int, timeout_ms: int) -> "int | asyncio.Future[int]":
        partition_log = self._log_for(tp)
        led = self.led.get(tp)
        if partition_log is None or led is None:
            return ErrorCode.not_leader_or_follower
        if partition_log.high_watermark >= offset:
            return ErrorCode.not_enough_replicas_after_append \
                if len(led.isr) < partition_log.config.min_insync_replicas else ErrorCode.none
        loop = asyncio.get_running_loop()
        waiter = Waiter(offset, loop.create_future())
        waiter.timer = loop.call_later(max(0, timeout_ms) / 1000, _answer, waiter, ErrorCode.request_timed_out)
        led.waiters.append(waiter)
        return waiter.future

    def check_lag(self) -> None:
        """Periodically: drop from the ISR followers that have not caught up for
        replica.lag.time.max.ms (a dead, stopped or slow broker)."""
        now = now_ms()
        lag = self._lag_time_ms()
        for tp, led in list(self.led.items()):
            if led.isr_write_pending:
                continue
            stuck = [b for b in led.isr if b != self.node_id
                     and now - led.followers.get(b, FollowerProgress()).last_caught_up_ms > lag]
            if stuck:
                log.warning("%s: followers %s have not caught up for %d ms: leaving the ISR", tp, stuck, lag)
                self._change_isr(tp, led, [b for b in led.isr if b not in stuck])

    def _change_isr(self, tp: TopicPartition, led: Led, isr: list[int]) -> None:
        if led.isr_write_pending or isr == led.isr:
            return
        led.isr_write_pending = True
        before = list(led.isr)
        wanted = PartitionState(self.node_id, led.epoch, isr, led.controller_epoch, led.zk_version)
        written = self._write_isr(tp, wanted)

        def done(future: "asyncio.Future[PartitionState | None]") -> None:
            led.isr_write_pending = False
            if self.led.get(tp) is not led:
                return  # deposed meanwhile
            state = None if future.cancelled() or future.exception() is not None else future.result()
            if state is None:
                # The controller changed the partition first (or ZooKeeper failed): the
                # watch brings its state, and the next fetch or lag check decides again.
                log.info("%s: ISR change to %s not written (the state znode moved on)", tp, isr)
                return
            log.info("%s: ISR %s -> %s", tp, before, state.isr)
            led.isr, led.zk_version = list(state.isr), state.zk_version
            partition_log = self._log_for(tp)
            if partition_log is not None:
                self._maybe_advance(tp, partition_log)

        written.add_done_callback(done)

    def close(self) -> None:
        for tp in list(self.led):
            self._resign(tp, ErrorCode.not_leader_or_follower)


def _answer(waiter: Waiter, code: int) -> None:
    if waiter.timer is not None:
        waiter.timer.cancel()
    if not waiter.future.done():
        waiter.future.set_result(int(code))
