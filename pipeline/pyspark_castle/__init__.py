"""PySpark finds Python data sources in top-level modules named ``pyspark_*`` that export
``DefaultSource`` (pyspark/sql/worker/lookup_data_sources.py): installing Castle's wheel
puts this package at the top level (pyproject.toml maps it), and ``format("castle")``
works with no ``register`` call."""

from pipeline.source import CastleDataSource as DefaultSource

__all__ = ["DefaultSource"]
