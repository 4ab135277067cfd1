"""request_percentage's arithmetic (broker/network/request_quota.py), a handler's time counted
step by step (``Timed``, driven by the connection's eager stepping and a real event loop),
and the throttle written into encoded answers (broker/quotas/throttle_field.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from typing import Any

import pytest

from broker.network import eager
from broker.network.request_quota import Timed, bounded, percentage
from broker.protocol import codec, fast
from broker.protocol.build import build
from broker.quotas import throttle_field
from broker.quotas.shared_counters import REQUEST, QuotaCounters
from tests.integration.kio_client import decode_response

T0 = 1_800_000_000_000


def test_handler_time_counts_as_a_percentage_of_one_thread() -> None:
    """Kafka's nanosToPercentage: a second of handler time is 100; 10 ms is 1."""
    assert percentage(1.0) == 100.0
    assert percentage(0.010) == pytest.approx(1.0)


def test_a_request_quota_throttles_as_kafka_bounded_by_one_window() -> None:
    """request_percentage 1 over 11 one-second samples: 50 ms of handler time (5) within the
    first window is a rate of 5 / 10 s = 0.5: under; 150 ms more (20 / 10 s = 2) is twice the
    bound: Kafka's throttle (2 - 1) / 1 x 10 s, then bounded to the window's 1000 ms."""
    counters = QuotaCounters(1, 11, 1000)
    assert counters.throttle_ms("c", REQUEST, percentage(0.05), 1.0, T0) == 0
    throttle = counters.throttle_ms("c", REQUEST, percentage(0.15), 1.0, T0)
    assert throttle == 10_000
    assert bounded(throttle, counters.window_ms) == 1000
    assert bounded(300, 1000) == 300


async def _handler(log: list[str]) -> str:
    _busy(0.03)
    await asyncio.sleep(0.2)  # waiting: not the handler's time
    log.append("resumed")
    _busy(0.03)
    return "answer"


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_timed_counts_the_steps_not_the_waits() -> None:
    """Driven as the connection drives a handler: eager.start, then a Task."""
    seen: list[tuple[Any, float]] = []

    def done(answer: Any, spent: float) -> Any:
        seen.append((answer, spent))
        return f"{answer}+throttled"

    async def main() -> Any:
        log: list[str] = []
        finished, task = eager.start(asyncio.get_running_loop(), Timed(_handler(log), done, time.perf_counter()))
        assert not finished
        return await task

    assert asyncio.run(main()) == "answer+throttled"
    (answer, spent), = seen
    assert answer == "answer"
    assert 0.06 <= spent < 0.15, spent  # two 30 ms steps, not the 200 ms sleep


def test_timed_reports_a_failing_handler() -> None:
    seen: list[tuple[Any, float]] = []

    async def failing() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("boom")

    async def main() -> None:
        finished, task = eager.start(asyncio.get_running_loop(),
                                     Timed(failing(), lambda a, s: seen.append((a, s)), time.perf_counter()))
        assert not finished
        await task

    with pytest.raises(ValueError):
        asyncio.run(main())
    assert len(seen) == 1 and seen[0][0] is None


def test_timed_finishing_at_once_answers_through_done() -> None:
    async def quick() -> int:
        return 7

    finished, value = eager.start(asyncio.new_event_loop(), Timed(quick(), lambda a, _s: a * 2, time.perf_counter()))
    assert finished and value == 14


# ---------------------------------------------------------------------- the field in the answer
def _ms(entity: Any) -> int:
    return int(entity.throttle_time / datetime.timedelta(milliseconds=1))


def _decoded(api_key: int, version: int, body: bytes) -> Any:
    entity, _size = codec.reader_for(codec.response_class(api_key, version))(body, 0)
    return entity


@pytest.mark.parametrize("api_key,version,body", [
    (19, 7, {"topics": [{"name": "t", "topic_id": None, "error_code": 0, "error_message": None,
                         "topic_config_error_code": 0, "num_partitions": 1, "replication_factor": 1, "configs": []}]}),
    (3, 12, {"brokers": [], "cluster_id": "c", "controller_id": 1, "topics": []}),
    (47, 0, {"error_code": 0, "topics": []}),  # OffsetDelete: after its error_code
    (12, 4, {"error_code": 0}),
])
def test_the_field_is_written_where_kafkas_schema_puts_it(api_key: int, version: int, body: dict[str, Any]) -> None:
    encoded = codec.encode_body(build(codec.response_class(api_key, version), {"throttle_time": 0, **body}))
    patched = throttle_field.written(api_key, version, encoded, 1234)
    answer = _decoded(api_key, version, patched)
    assert _ms(answer) == 1234
    assert dataclasses.replace(answer, throttle_time=datetime.timedelta(0)) == _decoded(api_key, version, encoded)
    # a larger throttle already there stays (the maximum of two quotas)
    assert throttle_field.written(api_key, version, patched, 100) == patched


class _Appended:
    error_code = 0
    base_offset = 5
    log_append_time = -1
    log_start_offset = 0
    error_message = None


@pytest.mark.parametrize("version", [1, 2, 3, 8, 9, 10, 12])
def test_produce_answers_get_the_field_after_their_partitions(version: int) -> None:
    topics = [("t", [(0, _Appended()), (1, _Appended())])]
    body = fast.encode_produce_response(version, topics, throttle_ms=40)
    patched = throttle_field.written(0, version, body, 900)
    assert patched == fast.encode_produce_response(version, topics, throttle_ms=900)
    assert throttle_field.written(0, version, body, 10) == body  # the byte-rate throttle was larger


def test_produce_with_leader_hints_gets_the_field_before_its_tagged_endpoints() -> None:
    class NotLeader(_Appended):
        error_code = 6

    topics = [("t", [(0, NotLeader())])]
    leaders = {("t", 0): (2, 7)}
    endpoints = [(2, "host-b", 9093)]
    body = fast.encode_produce_response(12, topics, leaders, endpoints, 0)
    patched = throttle_field.written(0, 12, body, 700)
    answer = _decoded(0, 12, patched)
    assert _ms(answer) == 700 and answer.node_endpoints[0].host == "host-b"


@pytest.mark.parametrize("version", [1, 4, 7, 12, 16])
def test_fetch_answers_carry_it_in_their_first_buffer(version: int) -> None:
    pieces = fast.encode_fetch_response(version, 0, 0, [], throttle_ms=0)
    patched = throttle_field.written(1, version, pieces[0], 321)
    assert patched == fast.encode_fetch_response(version, 0, 0, [], throttle_ms=321)[0]


def test_answers_without_the_field_are_left_alone() -> None:
    body = codec.encode_body(build(codec.response_class(3, 0), {"brokers": [], "topics": []}))  # Metadata v0
    assert throttle_field.offset(3, 0) is None
    assert throttle_field.written(3, 0, body, 500) == body
    assert throttle_field.offset(1, 0) is None  # Fetch v0


def test_a_whole_answer_decodes_after_patching() -> None:
    """Through the client's own decoder (kio_client), header and all."""
    body = codec.encode_body(build(codec.response_class(19, 7), {"throttle_time": 0, "topics": []}))
    frame = (9).to_bytes(4, "big") + b"\x00" + throttle_field.written(19, 7, body, 55)
    correlation_id, answer = decode_response(19, 7, frame)
    assert correlation_id == 9 and _ms(answer) == 55
