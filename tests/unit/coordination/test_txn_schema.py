"""__transaction_state records: the bytes of Kafka's TransactionLogKey/TransactionLogValue
schemas, built here field by field from the JSON schemas, against our codec."""

from __future__ import annotations

import struct

import pytest

from coordination.transactions import schema
from coordination.transactions.schema import TxnLogValue
from storage.records import iter_batches


def short_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def compact_string(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_key_is_version_0_and_the_transactional_id() -> None:
    expected = b"\x00\x00" + short_string("payments-1")
    assert schema.encode_key("payments-1") == expected
    assert schema.decode_key(expected) == "payments-1"
    assert schema.decode_key(b"\x00\x05" + short_string("x")) is None, "a key version Kafka does not know is skipped"


def test_value_v0_bytes_match_the_schema() -> None:
    value = TxnLogValue(producer_id=4001, producer_epoch=3, timeout_ms=60_000, status=2,
                        partitions={"orders": (0, 2), "__consumer_offsets": (17,)},
                        last_update_ms=1_700_000_000_123, start_ms=1_700_000_000_000)
    expected = (struct.pack(">hqhib", 0, 4001, 3, 60_000, 2)
                + struct.pack(">i", 2)
                + short_string("orders") + struct.pack(">iii", 2, 0, 2)
                + short_string("__consumer_offsets") + struct.pack(">ii", 1, 17)
                + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000))
    assert schema.encode_value(value) == expected
    assert schema.decode_value(expected) == value


def test_an_empty_transaction_has_null_partitions() -> None:
    value = TxnLogValue(7, 0, 900_000, 0, None, 5, -1)
    encoded = schema.encode_value(value)
    assert encoded == struct.pack(">hqhibiqq", 0, 7, 0, 900_000, 0, -1, 5, -1)
    assert schema.decode_value(encoded) == value


def test_value_v1_flexible_with_tagged_fields_is_read() -> None:
    body = (struct.pack(">hqhib", 1, 9, 1, 30_000, 1)
            + bytes([2])  # compact array of 1 entry
            + compact_string("t") + bytes([3]) + struct.pack(">ii", 4, 5) + b"\x00"  # partitions, no tags
            + struct.pack(">qq", 200, 100)
            + bytes([3])  # three tagged fields
            + bytes([0, 8]) + struct.pack(">q", 8)  # PreviousProducerId
            + bytes([1, 8]) + struct.pack(">q", 10)  # NextProducerId
            + bytes([2, 2]) + struct.pack(">h", 2))  # ClientTransactionVersion
    decoded = schema.decode_value(body)
    assert decoded == TxnLogValue(9, 1, 30_000, 1, {"t": (4, 5)}, 200, 100, previous_producer_id=8,
                                  next_producer_id=10, client_transaction_version=2)
    # Written back as v0 (what Kafka 4.x writes under transaction.version 1): the v0 fields survive.
    assert schema.decode_value(schema.encode_value(decoded)) == TxnLogValue(9, 1, 30_000, 1, {"t": (4, 5)}, 200, 100)
    # Written as v1 (transaction.version 2): the same bytes, byte for byte.
    assert schema.encode_value(decoded, 1) == body


def test_value_v1_writes_only_the_tagged_fields_that_differ_from_their_defaults() -> None:
    value = TxnLogValue(9, 1, 30_000, 0, None, 200, 100)
    assert schema.encode_value(value, 1) == struct.pack(">hqhib", 1, 9, 1, 30_000, 0) + b"\x00" + \
        struct.pack(">qq", 200, 100) + b"\x00"  # a null compact array, no tagged fields
    versioned = TxnLogValue(9, 1, 30_000, 0, None, 200, 100, client_transaction_version=2)
    assert schema.encode_value(versioned, 1).endswith(bytes([1, 2, 2]) + struct.pack(">h", 2))


def test_garbage_is_refused_with_a_schema_error() -> None:
    with pytest.raises(schema.TxnSchemaError):
        schema.decode_value(struct.pack(">h", 9) + b"\x00" * 30)
    with pytest.raises(schema.OffsetsSchemaError):
        schema.decode_value(struct.pack(">hq", 0, 1))  # truncated


def test_partition_for_is_kafkas_hash() -> None:
    # Utils.abs("my-group".hashCode()) % 50 is 12, the same function as for groups.
    assert schema.partition_for("my-group", 50) == 12


def test_state_batch_carries_records_and_tombstones() -> None:
    batch = schema.state_batch([(schema.encode_key("a"), b"v"), (schema.encode_key("b"), None)], 1234)
    ((header, records),) = list(iter_batches(batch))
    assert not header.is_control and not header.is_transactional
    assert [(schema.decode_key(r.key or b""), r.value) for r in records] == [("a", b"v"), ("b", None)]
