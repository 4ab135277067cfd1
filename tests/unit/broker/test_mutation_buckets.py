"""broker/quotas/mutation_buckets.py: Kafka's TokenBucket for controller_mutation_rate, strict
and permissive, shared by forked workers under the region's lock."""

from __future__ import annotations

import os

import pytest

from broker.quotas import mutation_buckets
from broker.quotas.mutation_buckets import MutationBuckets, burst, refilled, throttle_ms

T0 = 1_800_000_000_000  # ms


def test_the_arithmetic_is_kafkas() -> None:
    """Burst samples x window x rate; refill at the rate up to it; throttle until back at zero."""
    assert burst(5.0, 100, 1000) == 500.0  # TokenBucket's own example: Q=5, S=100, W=1s
    assert refilled(-60.0, T0, T0 + 1000, 5.0, 500.0) == -55.0
    assert refilled(490.0, T0, T0 + 10_000, 5.0, 500.0) == 500.0  # never above the burst
    assert throttle_ms(-60.0, 5.0) == 12_000  # -(-60) / 5 s, the example's 12 s
    assert throttle_ms(0.0, 5.0) == 0 and throttle_ms(3.0, 5.0) == 0


def test_strict_takes_until_below_zero_then_refuses() -> None:
    """A new bucket is full (burst 11 x 1 s x 2/s = 22): a take of 30 is allowed and leaves
    it at -8 with no throttle for that request; the next is refused with the time to refill."""
    buckets = MutationBuckets()
    try:
        assert buckets.take("k", 30, 2.0, 11, 1000, strict=True, now_ms=T0) == (True, 0)
        assert buckets.take("k", 1, 2.0, 11, 1000, strict=True, now_ms=T0 + 1000) == (False, 3000)  # -6 / 2
        assert buckets.take("k", 1, 2.0, 11, 1000, strict=True, now_ms=T0 + 3500) == (False, 500)
        # at T0 + 4000 the bucket is back at 0: taken again
        assert buckets.take("k", 4, 2.0, 11, 1000, strict=True, now_ms=T0 + 4000) == (True, 0)
        assert buckets.take("other", 22, 2.0, 11, 1000, strict=True, now_ms=T0 + 4000) == (True, 0)  # its own bucket
    finally:
        buckets.close()


def test_refused_takes_take_nothing() -> None:
    buckets = MutationBuckets()
    try:
        buckets.take("k", 24, 2.0, 11, 1000, strict=True, now_ms=T0)  # -> -2
        for _ in range(5):
            assert buckets.take("k", 100, 2.0, 11, 1000, strict=True, now_ms=T0)[0] is False
        assert buckets.take("k", 0, 2.0, 11, 1000, strict=False, now_ms=T0) == (True, 1000)  # still -2
    finally:
        buckets.close()


def test_permissive_always_takes_and_throttles_below_zero() -> None:
    buckets = MutationBuckets()
    try:
        assert buckets.take("k", 20, 2.0, 11, 1000, strict=False, now_ms=T0) == (True, 0)  # 2 left
        assert buckets.take("k", 10, 2.0, 11, 1000, strict=False, now_ms=T0) == (True, 4000)  # -8 / 2
        assert buckets.take("k", 10, 2.0, 11, 1000, strict=False, now_ms=T0) == (True, 9000)  # -18 / 2
    finally:
        buckets.close()


def test_giving_back_refills_no_more_than_the_burst() -> None:
    buckets = MutationBuckets()
    try:
        buckets.take("k", 30, 2.0, 11, 1000, strict=True, now_ms=T0)  # -> -8
        buckets.give_back("k", 30, 2.0, 11, 1000, now_ms=T0)  # -> 22
        assert buckets.take("k", 22, 2.0, 11, 1000, strict=False, now_ms=T0) == (True, 0)  # -> 0
        buckets.give_back("k", 1000, 2.0, 11, 1000, now_ms=T0)  # capped at 22
        assert buckets.take("k", 23, 2.0, 11, 1000, strict=False, now_ms=T0) == (True, 500)  # -> -1
    finally:
        buckets.close()


def test_forked_workers_share_the_bucket() -> None:
    """Two processes forked after ``prepare`` take from one bucket: their takes add up."""
    region = mutation_buckets.prepare()
    try:
        children = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 0
                try:
                    for _ in range(50):
                        mutation_buckets.shared().take("shared", 1, 1.0, 100, 1000, strict=False, now_ms=T0)
                except BaseException:
                    code = 1
                os._exit(code)
            children.append(pid)
        for pid in children:
            assert os.waitpid(pid, 0)[1] == 0
        # 100 of the 100-token burst are gone: the next take leaves it below zero
        assert region.take("shared", 1, 1.0, 100, 1000, strict=False, now_ms=T0) == (True, 1000)
    finally:
        region.close()
        mutation_buckets._region = None


@pytest.mark.parametrize("bound", [0.5, 10.0, 1000.0])
def test_a_full_bucket_takes_its_burst_at_once(bound: float) -> None:
    buckets = MutationBuckets()
    try:
        most = burst(bound, 11, 1000)
        assert buckets.take("k", most, bound, 11, 1000, strict=True, now_ms=T0) == (True, 0)
        assert buckets.take("k", 1, bound, 11, 1000, strict=True, now_ms=T0) == (True, 0)  # at exactly 0: allowed
        taken, throttle = buckets.take("k", 1, bound, 11, 1000, strict=True, now_ms=T0)
        assert not taken and throttle == round(1 / bound * 1000)
    finally:
        buckets.close()
