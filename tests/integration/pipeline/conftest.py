"""Spark in local mode (local[2]) against a real Castle broker process.

One SparkSession (one JVM) serves every Spark test module: starting a JVM costs seconds,
and modules share it as the issue asks of a module's tests. It is stopped at the end,
and its JVM process killed by PID. One broker serves each module; topics are named per
test so that tests do not see each other's records.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import uuid
from typing import Any, Iterator

import pytest

from tests.integration.conftest import Broker
from tests.integration.pipeline.spark_jvm import ensure_archive, spark_jvm_env

pyspark = pytest.importorskip("pyspark")

JVM_STOP_TIMEOUT = 5.0  # after gateway.shutdown() it has nothing left to do; killed after this


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    # Executors must run our interpreter (the venv has pyarrow, confluent-kafka, pipeline).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.update(spark_jvm_env(ensure_archive()))
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from pipeline import register

    session = (SparkSession.builder.master("local[2]").appName("castle-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    gateway = SparkContext._gateway
    jvm_process = getattr(gateway, "proc", None)
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()
        if gateway is not None:
            gateway.shutdown()
        if jvm_process is not None:
            try:
                jvm_process.wait(JVM_STOP_TIMEOUT)
            except Exception:
                os.kill(jvm_process.pid, signal.SIGKILL)
                jvm_process.wait(10)
        SparkContext._gateway = None
        SparkContext._jvm = None


@pytest.fixture(scope="module")
def castle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module (2 workers, own ports on: the source follows Metadata)."""
    base = str(tmp_path_factory.mktemp("castle"))
    broker = Broker(base, 2, {"num.partitions": 3})
    broker.start()
    try:
        yield broker
    finally:
        try:
            broker.stop(expect_code=None)
        finally:
            broker.cleanup()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    # Kafka topic names allow [A-Za-z0-9._-] only; test ids carry parameters.
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:60].strip("-")
    return f"{name}-{uuid.uuid4().hex[:6]}"
