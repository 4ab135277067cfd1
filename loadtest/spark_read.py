"""Batch read of a topic through Spark (format "castle") beside a plain confluent-kafka
consumer reading the same topic (issue 7's benchmark).

    .venv/bin/python -m loadtest.spark_read --bootstrap 127.0.0.1:9092 --topic spark-bench \\
        --num-records 1000000 --fill --partitions 4 --record-size 100

Steps: with --fill, produce --num-records records first (loadtest.producer_perf); then
read them all once with one consumer (loadtest.consumer_perf: assign, no group); then in
a SparkSession (--master, default local[2]) read the topic --repeat times with
``spark.read.format("castle")`` and an action that needs every value
(``count(*), sum(length(value))``). Spark's session start and one untimed warm-up read
(Python workers, JIT) are outside the clock. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any

from loadtest import consumer_perf, producer_perf
from loadtest.common import info, print_json


def fill(args: argparse.Namespace) -> dict[str, Any]:
    return producer_perf.run(producer_perf.parse_args([
        "--bootstrap", args.bootstrap, "--topic", args.topic, "--num-records", str(args.num_records),
        "--record-size", str(args.record_size), "--partitions", str(args.partitions), "--acks", "1",
        "--report-interval-s", "0"]))


def plain_consumer(args: argparse.Namespace) -> dict[str, Any]:
    return consumer_perf.run(consumer_perf.parse_args([
        "--bootstrap", args.bootstrap, "--topic", args.topic, "--num-records", str(args.num_records)]))


def spark_reads(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pipeline import register

    spark = (SparkSession.builder.master(args.master).appName("castle-spark-read-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        reader = (spark.read.format("castle").option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.topic))
        if args.min_partitions:
            reader = reader.option("minPartitions", str(args.min_partitions))
        df = reader.load()
        partitions = df.rdd.getNumPartitions()
        df.selectExpr("count(*)").collect()  # warm-up: Python workers started, code loaded
        runs = []
        for index in range(args.repeat):
            started = time.perf_counter()
            row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
            elapsed = time.perf_counter() - started
            runs.append({"elapsed_s": round(elapsed, 3), "records": row["n"], "value_bytes": row["bytes"],
                         "records_per_s": round(row["n"] / elapsed, 1)})
            info(f"spark read {index + 1}/{args.repeat}: {row['n']} records in {elapsed:.2f} s")
    finally:
        spark.stop()
    return {"master": args.master, "input_partitions": partitions, "runs": runs,
            "median_records_per_s": statistics.median(r["records_per_s"] for r in runs)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, default=1_000_000)
    p.add_argument("--fill", action="store_true", help="produce --num-records records first")
    p.add_argument("--partitions", type=int, default=4, help="partitions when --fill creates the topic")
    p.add_argument("--record-size", type=int, default=100, help="value bytes per record when filling")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--min-partitions", type=int, help="the source's minPartitions option")
    p.add_argument("--repeat", type=int, default=3, help="timed Spark reads")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result: dict[str, Any] = {"tool": "spark_read", "topic": args.topic, "machine": platform.platform(),
                              "cpus": os.cpu_count()}
    if args.fill:
        result["fill"] = {k: v for k, v in fill(args).items() if k in ("records_acked", "records_per_s", "partitions")}
    consumed = plain_consumer(args)
    result["plain_consumer"] = {k: consumed[k] for k in ("records", "records_per_s", "mib_per_s", "elapsed_s")
                                if k in consumed}
    result["spark"] = spark_reads(args)
    plain = result["plain_consumer"].get("records_per_s") or 0
    if plain:
        result["spark_vs_plain"] = round(result["spark"]["median_records_per_s"] / plain, 3)
    print_json(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
