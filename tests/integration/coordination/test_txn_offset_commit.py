"""TxnOffsetCommit over a real broker's socket: the worker forwards it to the coordinator
process, which writes the producer's transactional batch to __consumer_offsets through the
partition's owning worker. Its error codes (unknown member, old generation, a group never
seen, a partition that does not exist, a fenced producer epoch), OffsetFetch v7's UNSTABLE_OFFSET_COMMIT while the
offsets wait for their transaction, and the same after a restart (the load keeps them
pending: no marker has been written)."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.integration.conftest import wait_until
from tests.integration.coordination.test_group_protocol import (
    GROUP_BROKER,
    ensure_topic,
    fetch,
    heartbeat,
    join_until_member,
    request,
    sync,
)
from tests.integration.kio_client import KioClient

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("broker", [GROUP_BROKER], indirect=True)]

TXN_COMMIT, INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN = 28, 22, 25
# The transactional producer of "tx" (begin() sets it): the coordinator verifies that a
# group's offsets partition is in its transaction before a TxnOffsetCommit below v5 is
# written (KIP-890).
PRODUCER = {"id": -1, "epoch": -1}


def begin(client: KioClient, groups: list[str]) -> None:
    answer = client.call(INIT_PRODUCER_ID, 4, request(INIT_PRODUCER_ID, 4, transactional_id="tx",
                                                      transaction_timeout=600_000, producer_id=-1, producer_epoch=-1))
    assert answer.error_code == 0
    PRODUCER.update(id=int(answer.producer_id), epoch=int(answer.producer_epoch))
    for group in groups:
        added = client.call(ADD_OFFSETS_TO_TXN, 3, request(ADD_OFFSETS_TO_TXN, 3, transactional_id="tx",
                                                          producer_id=PRODUCER["id"], producer_epoch=PRODUCER["epoch"],
                                                          group_id=group))
        assert added.error_code == 0


def txn_commit(client: KioClient, version: int, group: str, offsets: list[tuple[str, int, int]],
               generation: int = -1, member_id: str = "", producer_epoch: int | None = None
               ) -> dict[tuple[str, int], int]:
    epoch = PRODUCER["epoch"] if producer_epoch is None else producer_epoch
    answer = client.call(TXN_COMMIT, version, request(
        TXN_COMMIT, version, transactional_id="tx", group_id=group, producer_id=PRODUCER["id"], producer_epoch=epoch,
        generation_id=generation, member_id=member_id, group_instance_id=None,
        topics=[{"name": t, "partitions": [{"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                            "committed_metadata": ""}]} for t, p, o in offsets]))
    return {(t.name, p.partition_index): int(p.error_code) for t in answer.topics for p in t.partitions}


def unstable_fetch(client: KioClient, group: str, partition: tuple[str, int]) -> tuple[int, int]:
    return fetch(client, 7, group, [partition])[partition]  # require_stable is set


def loaded(client: KioClient) -> None:
    wait_until(lambda: heartbeat(client, 4, "probe", 1, "probe") == ErrorCode.unknown_member_id, 20,
               "the coordinator to finish loading")


def test_txn_offset_commit_errors_and_pending_offsets_across_a_restart(broker: Any) -> None:
    with KioClient(broker.bootstrap) as client:
        loaded(client)
        ensure_topic(client, "t")
        begin(client, ["txg", "members", "never-seen"])
        # A producer that names no member commits for a group it creates (a simple consumer's).
        assert txn_commit(client, 3, "txg", [("t", 0, 11)]) == {("t", 0): 0}
        assert txn_commit(client, 0, "txg", [("t", 1, 12)]) == {("t", 1): 0}, "a second batch of the same producer"
        assert txn_commit(client, 3, "txg", [("t", 9, 1), ("absent", 0, 1)]) == {
            ("t", 9): ErrorCode.unknown_topic_or_partition, ("absent", 0): ErrorCode.unknown_topic_or_partition}
        assert unstable_fetch(client, "txg", ("t", 0)) == (-1, ErrorCode.unstable_offset_commit)
        assert unstable_fetch(client, "txg", ("t", 1)) == (-1, ErrorCode.unstable_offset_commit)
        assert fetch(client, 6, "txg", [("t", 0)]) == {("t", 0): (-1, 0)}, "without require_stable: nothing committed"
        # The transaction coordinator knows the producer's epoch: another one is refused
        # before anything is written (its verification answers PRODUCER_FENCED).
        assert txn_commit(client, 3, "txg", [("t", 1, 13)], producer_epoch=PRODUCER["epoch"] + 1) == {
            ("t", 1): ErrorCode.invalid_producer_epoch}
        assert txn_commit(client, 3, "txg", [("t", 1, 14)]) == {("t", 1): 0}

        joined = join_until_member(client, 9, "members")
        assert sync(client, 5, "members", joined.generation_id, joined.member_id,
                    [(joined.member_id, b"")], protocol_name="range").error_code == 0
        assert txn_commit(client, 3, "members", [("t", 0, 5)], joined.generation_id, "stranger") == {
            ("t", 0): ErrorCode.unknown_member_id}
        assert txn_commit(client, 3, "members", [("t", 0, 5)], joined.generation_id + 1, joined.member_id) == {
            ("t", 0): ErrorCode.illegal_generation}
        assert txn_commit(client, 3, "never-seen", [("t", 0, 5)], 4, "someone") == {("t", 0): ErrorCode.illegal_generation}
        assert txn_commit(client, 3, "members", [("t", 0, 5)], joined.generation_id, joined.member_id) == {("t", 0): 0}

    broker.restart()
    with KioClient(broker.bootstrap) as client:
        loaded(client)
        assert unstable_fetch(client, "txg", ("t", 0)) == (-1, ErrorCode.unstable_offset_commit)
        assert unstable_fetch(client, "members", ("t", 0)) == (-1, ErrorCode.unstable_offset_commit)
