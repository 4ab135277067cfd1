"""EndTxn that must be refused, through the coordinator process's path (a request body as
a client sends it, answered by a TransactionCoordinator over real logs): an unknown
transactional id and a producer id the id is not mapped to get INVALID_PRODUCER_ID_MAPPING,
a fenced epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2, as Kafka's KafkaApis
maps it), and none of them touches the committed transaction, the open one, the
__transaction_state log or the partitions' markers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.broker.test_txn_apis import END, Served

pytestmark = pytest.mark.transactions

INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED = 47, 49, 90


def end(served: Served, version: int, producer_id: int, epoch: int, *, commit: bool,
        transactional_id: str = "tx") -> int:
    return int(served.ask(END, version, transactional_id=transactional_id, producer_id=producer_id,
                          producer_epoch=epoch, committed=commit).error_code)


def snapshot(served: Served) -> tuple[Any, ...]:
    """Everything a refused EndTxn must leave as it was."""
    metadata = served.transactions.transactions["tx"]
    markers = {tp: served.harness.markers.markers(tp) for tp in served.harness.markers.logs}
    return (metadata.state, metadata.producer_id, metadata.producer_epoch, sorted(metadata.partitions),
            len(served.harness.state_log.entries()), list(served.harness.markers.written), markers)


def test_bad_end_txn_requests_change_nothing(tmp_path: Any) -> None:
    served = Served(tmp_path)
    try:
        pid = int(served.init().producer_id)
        assert served.init().producer_epoch == 1  # epoch 0 is now a zombie's
        assert served.add(3, pid, 1, {"orders": [0]}) == {("orders", 0): 0}
        assert end(served, 3, pid, 1, commit=True) == 0
        assert served.transactions.transactions["tx"].state.wire_name == "CompleteCommit"
        committed = snapshot(served)
        assert committed[5], "the commit wrote its marker"

        for version in (0, 3, 4):
            assert end(served, version, pid, 1, commit=False, transactional_id="nobody") == INVALID_PRODUCER_ID_MAPPING
            assert end(served, version, pid + 1, 1, commit=False) == INVALID_PRODUCER_ID_MAPPING
            fenced = INVALID_PRODUCER_EPOCH if version < 2 else PRODUCER_FENCED
            assert end(served, version, pid, 0, commit=False) == fenced
            assert snapshot(served) == committed
        assert "nobody" not in served.transactions.transactions

        # An open transaction is not ended (nor aborted) by them either.
        assert served.add(3, pid, 1, {"orders": [1]}) == {("orders", 1): 0}
        ongoing = snapshot(served)
        assert ongoing[0].wire_name == "Ongoing"
        assert end(served, 4, pid + 1, 1, commit=False) == INVALID_PRODUCER_ID_MAPPING
        assert end(served, 4, pid, 0, commit=True) == PRODUCER_FENCED
        assert snapshot(served) == ongoing
        assert end(served, 4, pid, 1, commit=False) == 0, "its own producer still ends it"
        assert served.transactions.transactions["tx"].state.wire_name == "CompleteAbort"
    finally:
        served.close()
