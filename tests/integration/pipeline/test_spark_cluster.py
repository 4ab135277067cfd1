"""The source on a Spark cluster, not only in local mode: ``local-cluster[2,1,1024]`` runs
a standalone master and worker with two executor JVMs of their own (what Spark's own
tests use for a real cluster on one machine). Planning happens on the driver, reads and
writes in the executors' Python workers, so everything they need must travel pickled."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.integration.clients import confluent_consume, confluent_create_topic, confluent_produce, make_records
from tests.integration.conftest import Broker
from tests.integration.pipeline.jobs import run_job

pytestmark = pytest.mark.integration

JOB_TIMEOUT = 300

JOB = """
import sys
from pyspark.sql import SparkSession
from pipeline import register
bootstrap, source, sink = sys.argv[1:4]
spark = SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
register(spark)
import time
# The executors register a moment after the session is up (the master launches their JVMs).
context, deadline = spark.sparkContext._jsc.sc(), time.monotonic() + 60
while context.getExecutorMemoryStatus().size() - 1 < 2 and time.monotonic() < deadline:
    time.sleep(0.2)
executors = context.getExecutorMemoryStatus().size() - 1  # less the driver
df = (spark.read.format("castle").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
      .option("minPartitions", "6").load())
hosts = df.rdd.mapPartitions(lambda rows: [__import__("os").getpid()]).distinct().count()
df.selectExpr("key", "value", "partition").write.format("castle").option("kafka.bootstrap.servers", bootstrap) \\
    .option("topic", sink).mode("append").save()
print("EXECUTORS", executors, "PYTHON_WORKER_PIDS", hosts, "COUNT", df.count())
spark.stop()
"""


def test_read_and_write_on_a_standalone_cluster(castle: Broker, topic_name: str) -> None:
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    confluent_create_topic(castle.bootstrap, source, 3)
    confluent_create_topic(castle.bootstrap, sink, 3)
    records = make_records(3000, 3, "cluster")
    confluent_produce(castle.bootstrap, source, records)
    job = run_job([sys.executable, "-c", JOB, castle.bootstrap, source, sink], JOB_TIMEOUT)
    assert job.returncode == 0, f"stdout:\n{job.stdout}\nstderr:\n{job.stderr[-4000:]}"
    words = job.stdout.split()
    figures = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1) if words[i].isupper()}
    assert figures["EXECUTORS"] == 2
    assert figures["PYTHON_WORKER_PIDS"] >= 2  # the ranges were read in more than one process
    assert figures["COUNT"] == len(records)
    copied: Any = confluent_consume(castle.bootstrap, sink, range(3), len(records))
    assert sorted((c.partition, c.value) for c in copied) == sorted((r.partition, r.value) for r in records)
