"""DescribeTransactionsResponse v0 as a reader can take it.

kio types TransactionStartTimeMs as a datetime, and its reader refuses a negative one, but
Kafka (and Castle) answer -1 for an id with no transaction started (an Empty one). The
entities here are derived from kio's at import: the same fields, metadata and class
attributes, with that one field read as a plain int64 and the response's list holding the
derived state entity. The bytes are the same, so kio's native reader decodes them
(``RemotePartitionClient.call(..., answer_class=DescribeTransactionsResponse)``). Brokers
still build kio's entity (broker/protocol/build.py writes -1 from an int).
"""

# No ``from __future__ import annotations``: kio's reader needs the field types as types.
import dataclasses
from typing import Any

from kio.schema.describe_transactions.v0 import response as kio_response
from kio.static.primitive import i64

START_TIME = "transaction_start_time"


def _derived(entity: type, name: str, replaced: dict[str, tuple[Any, dict[str, str]]]) -> type:
    """``entity`` with the fields in ``replaced`` given a new (type, metadata); everything else,
    ClassVars included, as kio has it."""
    fields = []
    for spec in dataclasses.fields(entity):
        kind, metadata = replaced.get(spec.name, (spec.type, dict(spec.metadata)))
        extra: dict[str, Any] = {"metadata": metadata}
        if spec.default is not dataclasses.MISSING:
            extra["default"] = spec.default
        if spec.default_factory is not dataclasses.MISSING:
            extra["default_factory"] = spec.default_factory
        fields.append((spec.name, kind, dataclasses.field(**extra)))
    class_attributes = {key: value for key, value in vars(entity).items() if key.startswith("__") and key.endswith("__")
                        and key in ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")}
    derived = dataclasses.make_dataclass(name, fields, namespace=class_attributes, frozen=True, slots=True, kw_only=True)
    derived.__module__ = __name__
    return derived


TransactionState = _derived(kio_response.TransactionState, "TransactionState",
                            {START_TIME: (i64, {"kafka_type": "int64"})})
_states = next(f for f in dataclasses.fields(kio_response.DescribeTransactionsResponse) if f.name == "transaction_states")
DescribeTransactionsResponse = _derived(kio_response.DescribeTransactionsResponse, "DescribeTransactionsResponse",
                                        {"transaction_states": (tuple[TransactionState, ...],  # type: ignore[valid-type]
                                                                dict(_states.metadata))})
