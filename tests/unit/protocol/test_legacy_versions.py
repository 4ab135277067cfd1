"""Produce v0-2 and Fetch v0-3, the versions Kafka 4.0 and kio dropped: Castle's hand-written
decoders and encoders against kafka-python's own classes for them (kafka.protocol.old),
byte for byte."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from broker.partitions.partition_ops import AppendResult
from broker.protocol import codec, fast, fetch_request, list_offsets_v0, offsets_legacy, produce_request
from broker.protocol.build import build

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.old import commit as kp_commit
    from kafka.protocol.old import fetch as kp_fetch
    from kafka.protocol.old import list_offsets as kp_list_offsets
    from kafka.protocol.old import produce as kp_produce


def _kp(module: Any, name: str, version: int) -> Any:
    return getattr(module, f"{name}_v{version}")


SET_A = b"\x00" * 8 + b"\x00\x00\x00\x0e" + b"legacy-set-one"
SET_B = b"another message set"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_requests_of_v0_to_v2_decode_as_kafka_python_encodes_them(version: int) -> None:
    cls = _kp(kp_produce, "ProduceRequest", version)
    body = cls(acks=-1, timeout_ms=1500, topic_data=[("orders", [(0, SET_A), (3, SET_B)]), ("audit", [(1, None)])]).encode()
    decoded = produce_request.decode(version, body, 0)
    assert (decoded.transactional_id, decoded.acks, decoded.timeout_ms) == (None, -1, 1500)
    assert [(t.name, [(i, None if r is None else bytes(r)) for i, r in t.partition_data]) for t in decoded.topic_data] == [
        ("orders", [(0, SET_A), (3, SET_B)]), ("audit", [(1, None)])]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_responses_of_v0_to_v2_are_kafka_pythons_bytes(version: int) -> None:
    results = [("orders", [(0, AppendResult(0, 41, 1_700_000_000_000, 0)), (3, AppendResult(6, -1))])]
    mine = fast.encode_produce_response(version, results)
    partitions = [(0, 0, 41, 1_700_000_000_000), (3, 6, -1, -1)]
    if version < 2:
        partitions = [p[:3] for p in partitions]
    fields: dict[str, Any] = {"responses": [("orders", partitions)]}
    if version >= 1:
        fields["throttle_time_ms"] = 0
    assert mine == _kp(kp_produce, "ProduceResponse", version)(**fields).encode()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_requests_of_v0_to_v3_decode_as_kafka_python_encodes_them(version: int) -> None:
    fields: dict[str, Any] = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1,
                              "topics": [("orders", [(0, 17, 65536), (2, 0, 1024)])]}
    if version == 3:
        fields["max_bytes"] = 52428800
    body = _kp(kp_fetch, "FetchRequest", version)(**fields).encode()
    decoded = fetch_request.decode(version, body, 0)
    assert (decoded.max_wait_ms, decoded.min_bytes, decoded.isolation_level) == (500, 1, 0)
    assert decoded.max_bytes == (52428800 if version == 3 else fetch_request.NO_LIMIT)
    assert [(t.topic, t.partitions) for t in decoded.topics] == [("orders", [(0, 17, 65536, -1, -1), (2, 0, 1024, -1, -1)])]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_responses_of_v0_to_v3_are_kafka_pythons_bytes(version: int) -> None:
    records = b"a message set of magic %d" % min(version, 1)
    topics = [fast.FetchTopicOut("orders", None, [  # type: ignore[arg-type]
        fast.FetchPartitionOut(0, 0, 99, 99, 0, len(records)), fast.FetchPartitionOut(2, 1, -1, -1, -1, 0)])]
    pieces = fast.encode_fetch_response(version, 0, 0, topics)
    mine = pieces[0] + records + pieces[1]
    fields: dict[str, Any] = {"responses": [("orders", [(0, 0, 99, records), (2, 1, -1, b"")])]}
    if version >= 1:
        fields["throttle_time_ms"] = 0
    theirs = _kp(kp_fetch, "FetchResponse", version)(**fields).encode()
    # kafka-python writes an empty records field as length 0, as Castle does.
    assert mine == theirs


def test_list_offsets_v0_decodes_and_answers_as_kafka_python_has_it() -> None:
    body = kp_list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[
        ("orders", [(0, -2, 1), (5, -1, 3)]), ("audit", [(1, 1_700_000_000_000, 0)])]).encode()
    decoded = list_offsets_v0.decode(body, 0)
    assert decoded.replica_id == -1
    assert [(t.name, t.partitions) for t in decoded.topics] == [
        ("orders", [(0, -2, 1), (5, -1, 3)]), ("audit", [(1, 1_700_000_000_000, 0)])]
    answer = [("orders", [(0, 0, [0]), (5, 0, [42])]), ("audit", [(1, 3, [])])]
    theirs = kp_list_offsets.ListOffsetsResponse_v0(topics=answer).encode()
    assert list_offsets_v0.encode_response(answer) == theirs


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_v0_v1_read_as_v2_whose_answer_is_theirs(version: int) -> None:
    fields: dict[str, Any] = {"group_id": "g", "topics": [("orders", [(0, 42, "m"), (3, 7, "")])]}
    if version == 1:
        fields.update(generation_id_or_member_epoch=5, member_id="member-1",
                      topics=[("orders", [(0, 42, 1_700_000_000_000, "m"), (3, 7, -1, "")])])
    body = _kp(kp_commit, "OffsetCommitRequest", version)(**fields).encode()
    request = offsets_legacy.decode_offset_commit(version, body, 0)
    assert type(request) is codec.request_class(8, 2)
    assert (request.group_id, request.generation_id_or_member_epoch, request.member_id) == \
        (("g", 5, "member-1") if version == 1 else ("g", -1, ""))
    assert [(t.name, [(p.partition_index, p.committed_offset, p.committed_metadata) for p in t.partitions])
            for t in request.topics] == [("orders", [(0, 42, "m"), (3, 7, "")])]
    answer = build(codec.response_class(8, 2), {"topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "error_code": 0},
                                           {"partition_index": 3, "error_code": 22}]}]})
    theirs = _kp(kp_commit, "OffsetCommitResponse", version)(topics=[("orders", [(0, 0), (3, 22)])]).encode()
    assert codec.encode_body(answer) == theirs


def test_offset_fetch_v0_is_v1_on_the_wire() -> None:
    body = kp_commit.OffsetFetchRequest_v0(group_id="g", topics=[("orders", [0, 3])]).encode()
    assert body == kp_commit.OffsetFetchRequest_v1(group_id="g", topics=[("orders", [0, 3])]).encode()
    request = offsets_legacy.decode_offset_fetch(0, body, 0)
    assert (request.group_id, [(t.name, list(t.partition_indexes)) for t in request.topics]) == ("g", [("orders", [0, 3])])
    answer = build(codec.response_class(9, 1), {"topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "committed_offset": 42, "metadata": "m", "error_code": 0}]}]})
    theirs = kp_commit.OffsetFetchResponse_v0(topics=[("orders", [(0, 42, "m", 0)])]).encode()
    assert codec.encode_body(answer) == theirs
