"""Clicks per user in event-time windows: a Structured Streaming job from topic to topic.

    python -m pipeline.examples.clicks_windowed --bootstrap 127.0.0.1:9092 --source clicks \\
        --sink clicks-per-user --checkpoint /tmp/clicks-per-user-checkpoint

Reads the JSON click events of ``produce_clicks`` from --source, takes each event's ``ts``
as its event time, counts clicks per user in tumbling --window windows, and writes the
counts to --sink (created if missing) as JSON keyed by the user:

    {"window_start":"2023-11-14T22:14:00.000Z","window_end":"2023-11-14T22:15:00.000Z","user":"user-7","clicks":42}

The watermark trails the latest event time seen by --watermark: an event older than it is
dropped, and the state of a window that ends behind it is freed. Output modes:

* update (default): each trigger writes the windows whose counts changed, so the last
  record of a (window, user) holds its count. Spark's Python data source sinks do not
  support update mode (``castle does not support Update mode``), so this mode writes each
  micro-batch with the batch writer, ``foreachBatch(... write.format("castle") ...)``.
* append: a window is written once, with its final count, when the watermark passes its
  end, straight through ``writeStream.format("castle")``. The newest windows wait for later
  events to move the watermark: an --available-now run never writes them.

The checkpoint holds the source offsets, the watermark and the window counts: run again
with the same --checkpoint and the job goes on where it stopped. --available-now processes
what the source holds, then exits; otherwise the job runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pipeline.examples import ensure_topic, spark_session

CLICK_SCHEMA = "user string, page string, ts bigint"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipeline.examples.clicks_windowed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap servers (default %(default)s)")
    parser.add_argument("--source", default="clicks", help="topic of click events (default %(default)s)")
    parser.add_argument("--sink", default="clicks-per-user", help="topic for the counts (default %(default)s)")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it to resume)")
    parser.add_argument("--window", default="1 minute", help="window length (default %(default)s)")
    parser.add_argument("--watermark", default="30 seconds", help="allowed lateness (default %(default)s)")
    parser.add_argument("--output-mode", choices=("update", "append"), default="update",
                        help="update: changed counts every trigger; append: final counts once (default %(default)s)")
    parser.add_argument("--trigger-seconds", type=float, default=5.0,
                        help="seconds between micro-batches (default %(default)s)")
    parser.add_argument("--available-now", action="store_true",
                        help="process everything the source holds now, then exit")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="where a new checkpoint starts reading: earliest or latest (default %(default)s)")
    parser.add_argument("--sink-partitions", type=int, default=3,
                        help="partitions if the sink topic is created (default %(default)s)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default %(default)s)")
    return parser.parse_args(argv)


def counts_per_window(clicks: Any, window: str, watermark: str) -> Any:
    """Raw records of the source -> (key, value) rows of JSON counts per window and user."""
    from pyspark.sql import functions as F

    events = (clicks
              .select(F.from_json(F.col("value").cast("string"), CLICK_SCHEMA).alias("click"))
              .select("click.*")
              .where(F.col("user").isNotNull() & F.col("ts").isNotNull())  # skip what is not a click
              .withColumn("event_time", F.timestamp_millis("ts")))
    counts = (events
              .withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", window), "user")
              .agg(F.count("*").alias("clicks")))
    return counts.select(
        F.col("user").alias("key"),
        F.to_json(F.struct(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                           "user", "clicks")).alias("value"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_topic(args.bootstrap, args.sink, args.sink_partitions)
    spark = spark_session("clicks-windowed", args.master)
    try:
        clicks = (spark.readStream.format("castle")
                  .option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.source)
                  .option("startingOffsets", args.starting_offsets)
                  .load())
        writer = (counts_per_window(clicks, args.window, args.watermark).writeStream
                  .queryName("clicks_windowed")
                  .outputMode(args.output_mode)
                  .option("checkpointLocation", args.checkpoint))
        if args.output_mode == "append":
            writer = (writer.format("castle")
                      .option("kafka.bootstrap.servers", args.bootstrap)
                      .option("topic", args.sink))
        else:
            def write_batch(batch: Any, _batch_id: int) -> None:
                (batch.write.format("castle").mode("append")
                 .option("kafka.bootstrap.servers", args.bootstrap)
                 .option("topic", args.sink)
                 .save())

            writer = writer.foreachBatch(write_batch)
        if args.available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
        query = writer.start()
        print(f"counting clicks of {args.source} per user and {args.window} window into {args.sink} "
              f"({args.output_mode} mode{', available now' if args.available_now else ', Ctrl-C to stop'})")
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
        if query.exception() is not None:
            print(f"the query failed: {query.exception()}", file=sys.stderr)
            return 1
        progress = query.recentProgress
        print(f"{len(progress)} micro-batches, {sum(p['numInputRows'] for p in progress)} click events read")
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
