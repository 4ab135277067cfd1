"""The hand-written Fetch and Produce response encoders write exactly kio's bytes, every
version.

kio encodes the whole Fetch response with the record bytes inside; the fast path writes
the pieces around them (the records go by sendfile). Joined, they must be equal. The kio
Produce answer is built by produce_oracle.kio_answer (build() of kio's entity, then kio's
serialization: what the handler did before the fast encoder).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.partitions.partition_ops import AppendResult
from broker.protocol import codec, fast
from broker.protocol.build import build
from tests.unit.protocol.produce_oracle import kio_answer


def _kio_bytes(version: int, error_code: int, session_id: int, topics: list[fast.FetchTopicOut],
               records: dict[tuple[int, int], bytes]) -> bytes:
    body = {
        "throttle_time": 0, "error_code": error_code, "session_id": session_id,
        "responses": [
            {"topic": t.name, "topic_id": t.topic_id, "partitions": [
                {"partition_index": p.partition_index, "error_code": p.error_code, "high_watermark": p.high_watermark,
                 "last_stable_offset": p.last_stable_offset, "log_start_offset": p.log_start_offset,
                 "aborted_transactions": None if p.aborted is None else [
                     {"producer_id": producer_id, "first_offset": first} for producer_id, first in p.aborted],
                 "preferred_read_replica": -1,
                 "records": records.get((ti, pi), b"")}
                for pi, p in enumerate(t.partitions)]}
            for ti, t in enumerate(topics)],
    }
    return codec.encode_body(build(codec.response_class(1, version), body))


def _fast_bytes(version: int, error_code: int, session_id: int, topics: list[fast.FetchTopicOut],
                records: dict[tuple[int, int], bytes]) -> bytes:
    pieces = fast.encode_fetch_response(version, error_code, session_id, topics)
    ordered = [records[(ti, pi)] for ti, t in enumerate(topics) for pi, p in enumerate(t.partitions) if p.records_length]
    assert len(pieces) == len(ordered) + 1
    out = bytearray(pieces[0])
    for data, piece in zip(ordered, pieces[1:]):
        out += data + piece
    return bytes(out)


# Aborted transactions: null (read_uncommitted), or a list, maybe empty (read_committed).
aborted_st = st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=130)
                       .map(tuple))
partition_st = st.tuples(st.integers(0, 2**31 - 1), st.sampled_from([0, 1, 3, 6, 76]), st.integers(-1, 2**62),
                         st.integers(-1, 2**62), st.integers(-1, 2**62), st.binary(max_size=300), aborted_st)
topic_st = st.tuples(st.text(alphabet="abcXYZ09._-", min_size=1, max_size=40), st.uuids(),
                     st.lists(partition_st, max_size=4))


@pytest.mark.parametrize("version", range(4, 17))
@settings(max_examples=40, deadline=None)
@given(topics_raw=st.lists(topic_st, max_size=3), error_code=st.sampled_from([0, 70]), session_id=st.integers(0, 2**31 - 1))
def test_fetch_response_matches_kio(version: int, topics_raw: list, error_code: int, session_id: int) -> None:  # type: ignore[type-arg]
    topics = []
    records: dict[tuple[int, int], bytes] = {}
    for ti, (name, topic_id, parts) in enumerate(topics_raw):
        out = []
        for pi, (index, code, hw, lso, start, data, aborted) in enumerate(parts):
            records[(ti, pi)] = data
            out.append(fast.FetchPartitionOut(index, code, hw, lso, start, len(data), aborted=aborted))
        topics.append(fast.FetchTopicOut(name, topic_id, out))
    session = session_id if version >= 7 else 0
    code = error_code if version >= 7 else 0
    assert _fast_bytes(version, code, session, topics, records) == _kio_bytes(version, code, session, topics, records)


def test_a_long_topic_list_uses_multibyte_varints() -> None:
    topics = [fast.FetchTopicOut(f"t{i}", uuid.uuid4(), [fast.FetchPartitionOut(0, 0, 5, 5, 0, 3)]) for i in range(200)]
    records = {(i, 0): b"abc" for i in range(200)}
    for version in (11, 12, 16):
        assert _fast_bytes(version, 0, 0, topics, records) == _kio_bytes(version, 0, 0, topics, records)


appended_st = st.builds(AppendResult, st.sampled_from([0, 2, 3, 47, 87]), st.integers(-1, 2**62),
                        st.sampled_from([-1, 0, 1_700_000_000_123]), st.integers(-1, 2**62),
                        st.one_of(st.none(), st.text(max_size=60)))
produce_topic_st = st.tuples(st.text(alphabet="abcXYZ09._-", min_size=1, max_size=40),
                             st.lists(st.tuples(st.integers(0, 2**31 - 1), appended_st), max_size=4))


@pytest.mark.parametrize("version", range(3, 11))
@settings(max_examples=40, deadline=None)
@given(topics=st.lists(produce_topic_st, max_size=3))
def test_produce_response_matches_kio(version: int, topics: list) -> None:  # type: ignore[type-arg]
    assert fast.encode_produce_response(version, topics) == kio_answer(version, topics)


def test_a_wide_produce_answer_uses_multibyte_varints() -> None:
    topics = [("t" * 200, [(p, AppendResult(0, p * 10, -1, 0, "m" * 150)) for p in range(300)])]
    for version in (8, 9, 10):
        assert fast.encode_produce_response(version, topics) == kio_answer(version, topics)
