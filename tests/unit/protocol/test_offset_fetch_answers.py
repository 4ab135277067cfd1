"""OffsetFetch answers a committed offset in every version, on a real GroupCoordinator
over real partition logs: v1-7 carry the one group's answer at the top level, v8+ nest
it in groups. (The one description serves both; before v8 it must not name the group,
which the response has no field for.)"""

from __future__ import annotations

from typing import Any

import pytest

from broker.context import CoordinatorContext
from broker.coordinator.offsets import OFFSET_FETCH, serve_offset_fetch
from broker.protocol import codec
from broker.protocol.build import build
from coordination.groups import offsets_schema as schema
from coordination.groups.replay import OffsetsRecord
from tests.unit.coordination.test_coordinator_offsets import FileOffsetsLog, coordinator, known


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_answers_the_commit_in_every_version(tmp_path: Any, version: int) -> None:
    offsets_log = FileOffsetsLog(str(tmp_path))
    try:
        served = coordinator(offsets_log)
        served.load([(0, [OffsetsRecord(schema.OffsetKey("g", "t", 0), schema.OffsetValue(42, 3, "meta", 1000))])])
        topics = [{"name": "t", "partition_indexes": [0]}]
        described = ({"groups": [{"group_id": "g", "member_id": None, "member_epoch": -1, "topics": topics}]}
                     if version >= 8 else {"group_id": "g", "topics": topics})
        request = build(codec.request_class(OFFSET_FETCH, version), {"require_stable": False, **described})
        ctx = CoordinatorContext(coordinator=served, api_key=OFFSET_FETCH, api_version=version, client_id="c",
                                 client_host="127.0.0.1", topic_exists=known)
        answer = serve_offset_fetch(ctx, request)
        assert isinstance(answer, codec.response_class(OFFSET_FETCH, version))
        group = answer.groups[0] if version >= 8 else answer
        if version >= 8:
            assert group.group_id == "g"
        if version >= 2:
            assert group.error_code == 0
        partition = group.topics[0].partitions[0]
        assert (group.topics[0].name, partition.partition_index, partition.committed_offset, partition.metadata) == (
            "t", 0, 42, "meta")
        assert codec.encode_body(answer)
    finally:
        offsets_log.close()
