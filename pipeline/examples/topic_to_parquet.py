"""A batch job: everything a topic holds now, written as Parquet.

    python -m pipeline.examples.topic_to_parquet --bootstrap 127.0.0.1:9092 --topic clicks --out /tmp/clicks-parquet

Reads the topic from its earliest to its latest offsets (one Spark task per partition,
or more with --min-partitions), keeps key and value as strings (UTF-8) next to topic,
partition, offset and timestamp, and writes --out as Parquet, one directory per
partition (``partition=0/`` ...), replacing what was there. Prints the rows written.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.examples import spark_session


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipeline.examples.topic_to_parquet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap servers (default %(default)s)")
    parser.add_argument("--topic", default="clicks", help="topic (or comma-separated topics) to read "
                                                          "(default %(default)s)")
    parser.add_argument("--out", required=True, help="output directory (replaced)")
    parser.add_argument("--min-partitions", type=int, default=None,
                        help="split the read into at least this many Spark tasks")
    parser.add_argument("--master", default="local[*]", help="Spark master (default %(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = spark_session("topic-to-parquet", args.master)
    try:
        reader = (spark.read.format("castle")
                  .option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.topic)
                  .option("startingOffsets", "earliest")
                  .option("endingOffsets", "latest"))
        if args.min_partitions:
            reader = reader.option("minPartitions", str(args.min_partitions))
        records = reader.load().selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                                           "topic", "partition", "offset", "timestamp")
        records.write.mode("overwrite").partitionBy("partition").parquet(args.out)
        written = spark.read.parquet(args.out).count()
        print(f"wrote {written} rows of {args.topic} to {args.out}")
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
