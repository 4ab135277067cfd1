"""Castle for Spark pipelines: the ``castle`` PySpark data source.

    from pipeline import register
    register(spark)
    df = (spark.read.format("castle")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "clicks").load())

Installed as a wheel, the source is also found by PySpark's own discovery (the
``pyspark_castle`` module, see pipeline/pyspark_castle/), so ``register`` is then only
needed by scripts that want to be sure.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "CastleDataSource"]


def register(spark: Any) -> None:
    """Make ``format("castle")`` known to this SparkSession (idempotent)."""
    from pipeline.source import CastleDataSource

    spark.dataSource.register(CastleDataSource)


def __getattr__(name: str) -> Any:
    # pyspark is imported only when the source is used: the broker never needs it.
    if name == "CastleDataSource":
        from pipeline.source import CastleDataSource

        return CastleDataSource
    raise AttributeError(name)
