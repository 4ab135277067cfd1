"""The example pipelines (pipeline/examples) end to end against a real broker, each Spark
job run as its users run it: ``python -m pipeline.examples.<name>`` in its own process
(and JVM), with a timeout. The click events are produced by produce_clicks; what the jobs
wrote is compared with what Python computes from the events the source topic holds."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from datetime import datetime
from typing import Any, NamedTuple

import pytest

from pipeline.examples import clicks_windowed, produce_clicks, topic_to_parquet
from tests.integration.conftest import Broker
from tests.integration.pipeline.jobs import run_job

pytestmark = pytest.mark.integration

JOB_TIMEOUT = 300.0
READ_TIMEOUT = 60.0
START_MS = 1_700_000_040_000  # on a minute boundary
WINDOW_MS = 60_000  # the examples' defaults: 1 minute windows, 30 seconds of watermark
WATERMARK_MS = 30_000


class Record(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp: int


def run_example(module: str, *args: str) -> str:
    """Run ``python -m pipeline.examples.<module>`` in a session of its own; its stdout."""
    result = run_job([sys.executable, "-m", f"pipeline.examples.{module}", "--master", "local[2]", *args], JOB_TIMEOUT)
    assert result.returncode == 0, f"{module} exited with {result.returncode}; stderr:\n{result.stderr[-5000:]}"
    return result.stdout


def read_topic(bootstrap: str, topic: str) -> list[Record]:
    """Every record the topic holds now, in (partition, offset) order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "castle-tests-unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions if ends[p] > 0])
        positions = dict.fromkeys(partitions, 0)
        got: list[Record] = []
        deadline = time.monotonic() + READ_TIMEOUT
        while any(positions[p] < ends[p] for p in partitions):
            assert time.monotonic() < deadline, f"read {len(got)} of {sum(ends.values())} records of {topic}"
            for msg in consumer.consume(num_messages=10000, timeout=0.5):
                assert msg.error() is None, msg.error()
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                if offset < ends[partition]:
                    got.append(Record(partition, offset, msg.key(), msg.value() or b"", msg.timestamp()[1]))
                positions[partition] = offset + 1
    finally:
        consumer.close()
    return sorted(got)


def produce(bootstrap: str, topic: str, *args: str) -> None:
    assert produce_clicks.main(["--bootstrap", bootstrap, "--topic", topic, *args]) == 0


def click_counts(bootstrap: str, topic: str) -> tuple[Counter, int]:
    """(window start ms, user) -> clicks, from the events the topic holds; the latest ts."""
    events = [json.loads(r.value) for r in read_topic(bootstrap, topic)]
    counts = Counter((e["ts"] - e["ts"] % WINDOW_MS, e["user"]) for e in events)
    return counts, max(e["ts"] for e in events)


def epoch_ms(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 1000)


def sink_counts(bootstrap: str, topic: str) -> tuple[dict[tuple[int, str], int], int]:
    """The last count written for each (window start ms, user), and how many were written.
    A user's records are keyed by the user, so they share one partition, in write order."""
    last: dict[tuple[int, str], int] = {}
    records = read_topic(bootstrap, topic)
    for record in records:
        row = json.loads(record.value)
        assert set(row) == {"window_start", "window_end", "user", "clicks"}, row
        assert record.key == row["user"].encode(), record
        start = epoch_ms(row["window_start"])
        assert epoch_ms(row["window_end"]) - start == WINDOW_MS, row
        last[(start, row["user"])] = row["clicks"]
    return last, len(records)


def jobs_read(stdout: str) -> int:
    match = re.search(r"(\d+) click events read", stdout)
    assert match, stdout
    return int(match.group(1))


@pytest.mark.parametrize("module", [produce_clicks, clicks_windowed, topic_to_parquet])
def test_each_example_explains_itself(module: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert "python -m pipeline.examples." in capsys.readouterr().out


def test_produce_clicks_writes_json_events_keyed_by_user(castle: Broker, topic_name: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    produce(castle.bootstrap, topic_name, "--count", "600", "--users", "7", "--start-ms", str(START_MS),
            "--minutes", "2", "--seed", "3")
    assert f"created topic {topic_name} (3 partitions)" in capsys.readouterr().out
    records = read_topic(castle.bootstrap, topic_name)
    assert len(records) == 600
    assert {r.partition for r in records} == {0, 1, 2}
    events = [json.loads(r.value) for r in records]
    assert all(set(e) == {"user", "page", "ts"} for e in events)
    assert all(r.key == e["user"].encode() for r, e in zip(records, events))
    assert {e["user"] for e in events} <= {f"user-{n}" for n in range(7)}
    stamps = [e["ts"] for e in events]
    assert START_MS - produce_clicks.MAX_LATENESS_MS <= min(stamps) and max(stamps) < START_MS + 2 * 60_000
    # records are in (partition, offset) order: produce order within each partition
    assert any(a.partition == b.partition and json.loads(b.value)["ts"] < json.loads(a.value)["ts"]
               for a, b in zip(records, records[1:])), "no event is out of order"
    # A second run appends to the topic it finds.
    produce(castle.bootstrap, topic_name, "--count", "10", "--users", "7")
    assert "created topic" not in capsys.readouterr().out
    assert len(read_topic(castle.bootstrap, topic_name)) == 610


def test_windowed_counts_in_update_mode_and_resumed_from_the_checkpoint(castle: Broker, topic_name: str,
                                                                       tmp_path: Any) -> None:
    source, sink, checkpoint = f"{topic_name}-clicks", f"{topic_name}-counts", str(tmp_path / "checkpoint")
    produce(castle.bootstrap, source, "--count", "4000", "--users", "20", "--start-ms", str(START_MS),
            "--minutes", "5", "--seed", "1")
    job = ("clicks_windowed", "--bootstrap", castle.bootstrap, "--source", source, "--sink", sink,
           "--checkpoint", checkpoint, "--available-now")
    assert jobs_read(run_example(*job)) == 4000
    expected, _latest = click_counts(castle.bootstrap, source)
    written, _ = sink_counts(castle.bootstrap, sink)
    assert written == dict(expected)  # every window, the open ones too: update mode writes each change

    # Later events, and one from long before the watermark: the job goes on from its
    # checkpoint (offsets, watermark, counts), reads only what is new, drops the late one.
    produce(castle.bootstrap, source, "--count", "1500", "--users", "20", "--start-ms", str(START_MS + 10 * 60_000),
            "--minutes", "2", "--seed", "2")
    late_event = {"user": "late-user", "page": "/", "ts": START_MS}
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": castle.bootstrap})
    producer.produce(source, key=b"late-user", value=json.dumps(late_event))
    assert producer.flush(30) == 0
    assert jobs_read(run_example(*job)) == 1501
    expected, _latest = click_counts(castle.bootstrap, source)
    del expected[(START_MS, "late-user")]
    written, _ = sink_counts(castle.bootstrap, sink)
    assert written == dict(expected)


def test_windowed_counts_in_append_mode_are_final_and_written_once(castle: Broker, topic_name: str,
                                                                  tmp_path: Any) -> None:
    source, sink = f"{topic_name}-clicks", f"{topic_name}-counts"
    produce(castle.bootstrap, source, "--count", "3000", "--users", "15", "--start-ms", str(START_MS),
            "--minutes", "5", "--seed", "4")
    assert jobs_read(run_example("clicks_windowed", "--bootstrap", castle.bootstrap, "--source", source,
                                 "--sink", sink, "--checkpoint", str(tmp_path / "checkpoint"),
                                 "--output-mode", "append", "--available-now")) == 3000
    counts, latest = click_counts(castle.bootstrap, source)
    watermark = latest - WATERMARK_MS
    # Only windows the watermark has passed are written; the newest stays open.
    expected = {key: n for key, n in counts.items() if key[0] + WINDOW_MS <= watermark}
    assert len({start for start, _user in expected}) < len({start for start, _user in counts})
    written, records = sink_counts(castle.bootstrap, sink)
    assert written == expected
    assert records == len(expected)


def test_topic_to_parquet_writes_every_record(castle: Broker, topic_name: str, tmp_path: Any) -> None:
    import pyarrow as pa
    import pyarrow.dataset as ds

    produce(castle.bootstrap, topic_name, "--count", "2500", "--users", "30", "--seed", "5")
    out = str(tmp_path / "parquet")
    stdout = run_example("topic_to_parquet", "--bootstrap", castle.bootstrap, "--topic", topic_name, "--out", out,
                         "--min-partitions", "5")
    assert f"wrote 2500 rows of {topic_name} to {out}" in stdout
    assert sorted(name for name in os.listdir(out) if name.startswith("partition=")) == [
        "partition=0", "partition=1", "partition=2"]
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    stamps = table.column("timestamp").cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
    rows = sorted((int(p), o, k, v, t) for p, o, k, v, t in zip(
        table.column("partition").to_pylist(), table.column("offset").to_pylist(),
        table.column("key").to_pylist(), table.column("value").to_pylist(), stamps))
    assert set(table.column("topic").to_pylist()) == {topic_name}
    expected = [(r.partition, r.offset, (r.key or b"").decode(), r.value.decode(), r.timestamp)
                for r in read_topic(castle.bootstrap, topic_name)]
    assert rows == expected
