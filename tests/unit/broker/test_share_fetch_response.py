"""The hand-built ShareFetch response reads back with Kafka's schema (kio's decoder), records
included, for several topics and partitions with and without records."""

from __future__ import annotations

import uuid

from kio.schema.share_fetch.v1.response import ShareFetchResponse
from kio.serial import entity_reader

from broker.protocol.share_fetch_response import SharePartitionOut, encode
from tests.unit.broker.partition_world import batch


def test_the_pieces_with_their_records_decode_as_kafkas_response():
    first, second = uuid.uuid4(), uuid.uuid4()
    records_a, records_b = batch(3, b"a"), batch(2, b"b")
    topics = [
        (first, [SharePartitionOut(0, 0, 0, -1, -1, len(records_a), ((0, 2, 1),)),
                 SharePartitionOut(1, 6, 121, 2, 7, 0, ())]),
        (second, [SharePartitionOut(3, 0, 0, -1, -1, len(records_b), ((10, 10, 2), (11, 11, 1)))]),
    ]
    pieces = encode(0, 30_000, topics, [(2, "broker-2", 9093)])
    assert len(pieces) == 4
    body = pieces[0] + records_a + pieces[1] + b"" + pieces[2] + records_b + pieces[3]
    response = entity_reader(ShareFetchResponse)(body, 0)[0]
    assert (response.error_code, response.error_message) == (0, None)
    assert response.acquisition_lock_timeout.total_seconds() == 30
    assert [t.topic_id for t in response.responses] == [first, second]
    p0, p1 = response.responses[0].partitions
    assert (p0.partition_index, p0.error_code, p0.records) == (0, 0, records_a)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p0.acquired_records] == [(0, 2, 1)]
    assert (p1.partition_index, p1.error_code, p1.acknowledge_error_code) == (1, 6, 121)
    assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (2, 7)
    assert p1.records in (b"", None)
    (p3,) = response.responses[1].partitions
    assert p3.records == records_b
    assert [(a.first_offset, a.delivery_count) for a in p3.acquired_records] == [(10, 2), (11, 1)]
    assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [(2, "broker-2", 9093, None)]


def test_an_error_answer_has_no_topics():
    (piece,) = encode(122, 0, [], [], "no share session")
    response = entity_reader(ShareFetchResponse)(piece, 0)[0]
    assert (response.error_code, response.error_message, response.responses) == (122, "no share session", ())
