"""The fetch purgatory's bookkeeping: which partitions woke a parked fetch, so that the
fetch reads only those again (broker/apis/fetch.py), and no append is lost between a
read and the next wait."""

from __future__ import annotations

import asyncio

from broker.partitions.purgatory import FetchPurgatory
from storage.types import TopicPartition

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def _run(coro):
    return asyncio.run(coro)


def test_a_wake_resolves_the_watch_and_names_the_partition() -> None:
    async def scenario() -> None:
        purgatory = FetchPurgatory()
        watch = purgatory.watch([A, B])
        purgatory.wake(C)  # not watched
        assert not watch.future.done() and watch.woken == set()
        purgatory.wake(B)
        assert watch.future.done()
        assert await watch.wait(0.01) is True
        assert watch.woken == {B}
    _run(scenario())


def test_rearm_hands_over_every_partition_woken_since_the_last_arm_and_starts_afresh() -> None:
    async def scenario() -> None:
        purgatory = FetchPurgatory()
        watch = purgatory.watch([A, B])
        purgatory.wake(A)
        purgatory.wake(B)  # the future is already done: B must still be remembered
        assert watch.rearm() == {A, B}
        assert not watch.future.done() and watch.woken == set()
        # An append after the rearm (that is, after the fetch's next read begins) wakes the new future.
        purgatory.wake(A)
        assert await watch.wait(0.01) is True
        assert watch.rearm() == {A}
        assert await watch.wait(0.01) is False  # nothing since: the wait times out
    _run(scenario())


def test_a_cancelled_watch_is_no_longer_woken() -> None:
    async def scenario() -> None:
        purgatory = FetchPurgatory()
        watch = purgatory.watch([A])
        watch.cancel()
        purgatory.wake(A)
        assert not watch.future.done() and watch.woken == set()
        assert len(purgatory) == 0
    _run(scenario())


def test_a_parked_wait_is_woken_by_an_append_or_ends_at_its_timeout_or_on_cancel() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        purgatory = FetchPurgatory()
        watch = purgatory.watch([A])
        loop.call_later(0.01, purgatory.wake, A)
        assert await asyncio.wait_for(watch.wait(5), 5) is True
        watch.rearm()
        began = loop.time()
        assert await asyncio.wait_for(watch.wait(0.05), 5) is False
        assert loop.time() - began >= 0.04
        watch.rearm()
        parked = loop.create_task(watch.wait(30))
        await asyncio.sleep(0.01)
        parked.cancel()
        await asyncio.gather(parked, return_exceptions=True)
        assert parked.cancelled()
        purgatory.wake(A)  # the cancelled future is done: the wake passes it by
        watch.cancel()
        assert len(purgatory) == 0
    _run(scenario())
