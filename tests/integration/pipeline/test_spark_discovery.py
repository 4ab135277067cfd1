"""PySpark finds the source by itself in an installed wheel (the top-level
``pyspark_castle`` module), so ``format("castle")`` works without ``register``.

The editable install the tests run from cannot show this (PySpark lists top-level
modules on sys.path; an editable install maps packages through an import hook), so the
test builds the wheel, installs it into a directory of its own, and runs a Spark job in
a fresh interpreter with only that directory added to its path."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from tests.integration.clients import confluent_create_topic, confluent_produce, make_records
from tests.integration.conftest import Broker
from tests.integration.pipeline.jobs import REPO, job_env, run_job

pytestmark = pytest.mark.integration

JOB_TIMEOUT = 240

JOB = """
import os, sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
df = spark.read.format("castle").option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", sys.argv[3]).load()
print("COUNT", df.count())
spark.stop()
"""


def test_an_installed_wheel_is_discovered_without_register(castle: Broker, topic_name: str, tmp_path: Any) -> None:
    confluent_create_topic(castle.bootstrap, topic_name, 2)
    confluent_produce(castle.bootstrap, topic_name, make_records(30, 2, "found"))
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    built = run_job([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                     "-w", str(wheels), REPO], 300, dict(os.environ))
    assert built.returncode == 0, built.stderr
    (wheel,) = list(wheels.glob("castle-*.whl"))
    installed = run_job([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                         str(wheel)], 300, dict(os.environ))
    assert installed.returncode == 0, installed.stderr
    assert (target / "pyspark_castle" / "__init__.py").exists()
    env = job_env(PYTHONPATH=str(target))
    job = run_job([sys.executable, "-c", JOB, castle.bootstrap, str(target), topic_name], JOB_TIMEOUT, env)
    assert job.returncode == 0, f"stdout:\n{job.stdout}\nstderr:\n{job.stderr[-4000:]}"
    assert "COUNT 30" in job.stdout
    # The control: without the wheel's directory nothing names the source "castle".
    del env["PYTHONPATH"]
    unfound = run_job([sys.executable, "-c", JOB, castle.bootstrap, str(target), topic_name], JOB_TIMEOUT, env)
    assert unfound.returncode != 0 and "DATA_SOURCE_NOT_FOUND" in unfound.stderr and "COUNT" not in unfound.stdout
