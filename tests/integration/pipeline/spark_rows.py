"""Reading a ``format("castle")`` DataFrame back into the tests' record shape."""

from __future__ import annotations

from typing import Any

from tests.integration.clients import Got

# Timestamps leave Spark as epoch milliseconds: no Python timezone conversion involved.
COLUMNS = ("partition", "offset", "key", "value", "headers", "unix_millis(timestamp) AS ts", "timestampType", "topic")


def castle_reader(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("castle").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def got_rows(df: Any) -> list[Got]:
    rows = df.selectExpr(*COLUMNS).collect() if "headers" in df.columns else \
        df.selectExpr(*[c for c in COLUMNS if c != "headers"]).collect()
    return [Got(row["partition"], row["offset"], bytes(row["key"]) if row["key"] is not None else None,
                bytes(row["value"]), headers_of(row), row["ts"]) for row in rows]


def headers_of(row: Any) -> tuple[tuple[str, bytes], ...]:
    if "headers" not in row or not row["headers"]:
        return ()
    return tuple((h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in row["headers"])
