"""The follower's Fetch v15 request, encoded by hand, reads back with Kafka's schema and the
leader's decoder; its hand decoder of the answers reads what Kafka's schema (kio's encoder)
writes: every partition field the follower uses, DivergingEpoch among the tagged fields, null
and empty records, aborted transactions skipped; the records are views of the frame, not
copies. A frame cut short anywhere is a ProtocolViolation."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from broker.protocol import codec, fetch_request, replica_fetch
from broker.protocol.body_reader import BodyReader
from broker.protocol.build import build
from broker.protocol.errors import ProtocolViolation
from tests.unit.broker.partition_world import batch


def _partition(index: int, records: bytes | None, **extra: object) -> dict[str, object]:
    fields: dict[str, object] = {"partition_index": index, "error_code": 0, "high_watermark": 100 + index,
                                 "last_stable_offset": 90 + index, "log_start_offset": index,
                                 "aborted_transactions": None, "preferred_read_replica": -1, "records": records}
    fields.update(extra)
    return fields


def _encoded(topics: list[dict[str, object]], error_code: int = 0) -> bytes:
    entity = build(codec.response_class(1, 15), {"throttle_time": 0, "error_code": error_code, "session_id": 0,
                                                  "responses": topics})
    return codec.encode_body(entity)


def test_an_answer_written_by_kafkas_schema_reads_back() -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    records = batch(3, b"r")
    body = _encoded([
        {"topic_id": first, "partitions": [
            _partition(0, records),
            _partition(1, None, error_code=6),
            _partition(2, b"", diverging_epoch={"epoch": 4, "end_offset": 77},
                       current_leader={"leader_id": 2, "leader_epoch": 5},
                       aborted_transactions=[{"producer_id": 9, "first_offset": 3}])]},
        {"topic_id": second, "partitions": [_partition(7, records)]},
    ])
    frame = b"\x00\x00\x00\x07\x00" + body  # a correlation id and the header's empty tagged fields
    answer = replica_fetch.decode(frame, 5)
    assert answer.error_code == 0
    assert [t.topic_id for t in answer.responses] == [first, second]
    p0, p1, p2 = answer.responses[0].partitions
    assert (p0.partition_index, p0.error_code, p0.high_watermark, p0.log_start_offset) == (0, 0, 100, 0)
    assert isinstance(p0.records, memoryview) and bytes(p0.records) == records and p0.diverging_epoch is None
    assert (p1.error_code, p1.records) == (6, None)
    assert p2.diverging_epoch == (4, 77) and p2.records is not None and bytes(p2.records) == b""
    (p7,) = answer.responses[1].partitions
    assert (p7.partition_index, bytes(p7.records or b"")) == (7, records)


def test_a_top_level_error_has_no_topics() -> None:
    answer = replica_fetch.decode(_encoded([], error_code=71), 0)
    assert (answer.error_code, answer.responses) == (71, [])


def test_every_cut_of_the_frame_is_refused() -> None:
    body = _encoded([{"topic_id": uuid.uuid4(), "partitions": [
        _partition(0, batch(2, b"c"), diverging_epoch={"epoch": 1, "end_offset": 5})]}])
    for end in range(len(body)):
        with pytest.raises(ProtocolViolation):
            replica_fetch.decode(body[:end], 0)


def test_the_request_reads_back_with_kafkas_schema_and_the_leaders_decoder() -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    topics = {first: [replica_fetch.FetchPosition(0, 3, 1000, 2, 10, 1 << 20),
                      replica_fetch.FetchPosition(5, 3, 7, -1, 0, 4096)],
              second: [replica_fetch.FetchPosition(2, 9, 1 << 40, 8, 1 << 39, 1 << 20)]}
    body = replica_fetch.encode_request(7, 500, 1, 10 << 20, topics)
    request = codec.decode_request(1, 15, body, 0)
    assert (request.max_wait, request.min_bytes, request.max_bytes, request.isolation_level) == (
        timedelta(milliseconds=500), 1, 10 << 20, 0)
    assert (request.session_id, request.session_epoch, request.rack_id) == (0, -1, "")
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (7, -1)
    assert request.forgotten_topics_data == ()
    assert [t.topic_id for t in request.topics] == [first, second]
    got = [(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset,
            p.partition_max_bytes) for t in request.topics for p in t.partitions]
    assert got == [tuple(p) for ps in topics.values() for p in ps]
    ours = fetch_request.decode(15, body, 0)
    assert ours.replica_id == 7 and [t.topic_id for t in ours.topics] == [first, second]


def test_a_tagged_field_shorter_than_its_value_is_refused() -> None:
    """A DivergingEpoch tag (epoch int32, end_offset int64) of 4 bytes, and a follower's
    ReplicaState of 4, would be read from the bytes after them: both are refused; the section
    reader finds the tag's value, or None, and ends after the section either way."""
    section = b"\x02" + b"\x05\x01\x09" + b"\x00\x04" + b"\x00\x00\x00\x07"  # tags 5 and 0, 1 and 4 bytes
    reader = BodyReader(memoryview(section + b"\xff"), 0, True, "test")
    assert reader.tagged_field(0, 4) == 6 and reader.position == len(section)
    reader = BodyReader(memoryview(section), 0, True, "test")
    assert reader.tagged_field(3, 4) is None and reader.position == len(section)
    with pytest.raises(ProtocolViolation):
        BodyReader(memoryview(section), 0, True, "test").tagged_field(0, 12)
