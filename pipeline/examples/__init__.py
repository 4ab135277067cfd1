"""Example pipelines on the ``castle`` data source, each runnable by one command (see
README.md here):

    python -m pipeline.examples.produce_clicks --bootstrap 127.0.0.1:9092 --topic clicks --count 10000
    python -m pipeline.examples.clicks_windowed --bootstrap 127.0.0.1:9092 --source clicks \\
        --sink clicks-per-user --checkpoint /tmp/clicks-ckpt
    python -m pipeline.examples.topic_to_parquet --bootstrap 127.0.0.1:9092 --topic clicks --out /tmp/clicks-parquet

What the scripts share lives here: making a topic if it is missing, and a local
SparkSession with the source registered.
"""

from __future__ import annotations

import os
import sys
from typing import Any

TOPIC_TIMEOUT = 30.0


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> bool:
    """Create ``topic`` unless it exists; True when this call created it."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                 request_timeout=TOPIC_TIMEOUT)[topic]
    try:
        future.result(timeout=TOPIC_TIMEOUT)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise
    return True


def spark_session(app: str, master: str) -> Any:
    """A SparkSession for an example: no UI, UTC, few shuffle partitions (a small local
    job; Spark's default of 200 makes each streaming micro-batch slow), castle registered."""
    # Python workers must run this interpreter: it has pyarrow, confluent-kafka and pipeline.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pipeline import register

    spark = (SparkSession.builder.master(master).appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
