"""The ``castle`` data source for PySpark (the Python Data Source API, PySpark 4.2+):
batch and streaming reads and writes with the options and columns of Spark's own Kafka
source, so pipelines port by changing ``format("kafka")`` to ``format("castle")``.

Driver side (planning): options are checked, topics and offsets come from the brokers
(pipeline/cluster.py), ranges are cut (pipeline/plan.py). Executor side: each input
partition is one offset range read straight from the broker (pipeline/read_range.py);
each write task produces its rows (pipeline/write.py). Objects here are pickled between
the driver, its planner processes and the executors: clients are made on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipeline import plan
from pipeline.cluster import Cluster, PlanError
from pipeline.offsets import OffsetRange, PartitionOffsets, from_json_dict, rate_limit, split_ranges, to_json_dict
from pipeline.options import SinkOptions, SourceOptions
from pipeline.read_range import RangeReader
from pipeline.write import SinkSchemaError, check_producer_config, produce_rows, sink_columns


def source_schema(include_headers: bool) -> StructType:
    """The columns of Spark's Kafka source (built here, not parsed from DDL: parsing needs
    the JVM, which the planner and executor processes do not have)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class CastleDataSource(DataSource):
    """``spark.read.format("castle")``, ``readStream``, ``write`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "castle"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return source_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options, streaming=False)
        check_schema(schema, options)
        return CastleBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = SourceOptions.parse(self.options, streaming=True)
        check_schema(schema, options)
        return CastleStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        refuse_overwrite(overwrite)
        return CastleWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # overwrite is the "complete" output mode here: every trigger writes the whole
        # result table again, as Spark's Kafka sink does in that mode.
        return CastleStreamWriter(self.options, schema)


def refuse_overwrite(overwrite: bool) -> None:
    """A topic is a log: nothing can be overwritten, so a batch mode("overwrite") would
    only append while promising a replace. Spark's Kafka sink refuses Overwrite too.
    (Spark itself refuses ErrorIfExists, the mode of a save() without mode(), for every
    Python data source: hence mode("append").)"""
    if overwrite:
        raise SinkSchemaError('topics are append-only: mode("overwrite") cannot replace a topic\'s records; '
                              'write with mode("append")')


def check_schema(schema: StructType, options: SourceOptions) -> None:
    """A user schema (``.schema(...)``) is refused unless it is the source's own, as
    Spark's Kafka source does: the columns are fixed; cast them in the query."""
    expected = source_schema(options.include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [(f.name, f.dataType) for f in expected.fields]:
        raise PlanError(f"format castle has a fixed schema ({expected.simpleString()}); "
                        f"a user-specified schema ({schema.simpleString()}) is not supported: cast the columns instead")


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """One offset range; everything an executor needs is in it or in the reader."""

    range: OffsetRange

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", self.range)


class RangeReading:
    """What the batch and stream readers share: reading ranges on executors."""

    options: SourceOptions

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, RangePartition):
            # Spark turns an empty plan into one InputPartition(None): nothing to read.
            return iter(())
        schema = to_arrow_schema(source_schema(self.options.include_headers), timezone="UTC")
        reader = RangeReader(self.options.client, schema, self.options.include_headers,
                             self.options.fail_on_data_loss, self.options.poll_timeout)
        return reader.read(partition.range)

    def input_partitions(self, ranges: list[OffsetRange]) -> list[InputPartition]:
        return [RangePartition(piece) for piece in split_ranges(ranges, self.options.min_partitions)]


class CastleBatchReader(RangeReading, DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        cluster = Cluster(options.client, options.metadata_timeout)
        partitions = cluster.partitions(options.subscription)
        start = plan.starting_offsets(cluster, options.starting, partitions, options.fail_on_data_loss)
        end = plan.ending_offsets(cluster, options.ending, partitions)
        return self.input_partitions(plan.batch_ranges(start, end))


class CastleStreamReader(RangeReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{topic: {partition: next offset}}``, the JSON of Spark's Kafka source;
    the checkpoint keeps them, so a restarted query resumes where its last committed
    micro-batch ended. Partitions and topics that appear are picked up at each trigger."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.cluster = Cluster(options.client, options.metadata_timeout)
        self.available_now_cap: PartitionOffsets | None = None
        self.last_latest: PartitionOffsets | None = None

    def initialOffset(self) -> dict:
        options = self.options
        partitions = self.cluster.partitions(options.subscription)
        return to_json_dict(plan.starting_offsets(self.cluster, options.starting, partitions,
                                                  options.fail_on_data_loss))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_cap = self.cluster.latest(self.cluster.partitions(self.options.subscription))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_dict(start)
        latest = self.cluster.latest(self.cluster.partitions(self.options.subscription))
        self.last_latest = latest
        latest = plan.capped(latest, self.available_now_cap)
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            from_offsets = {**self.cluster.earliest(new), **begin} if new else begin
            latest = rate_limit(from_offsets, latest, limit.max_rows)
        # Partitions that went away are left out: partitions() reports them as data loss.
        return to_json_dict(latest)

    def reportLatestOffset(self) -> dict | None:
        return to_json_dict(self.last_latest) if self.last_latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = from_json_dict(start), from_json_dict(end)
        if begin == until:
            return []
        ranges = plan.stream_ranges(self.cluster, begin, until, self.options.fail_on_data_loss)
        return self.input_partitions(ranges)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, as with Spark's Kafka
        source (no group offsets are committed to the broker)."""

    def stop(self) -> None:
        self.cluster.close()


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


class RowWriting:
    """What the batch and stream writers share: options and columns checked on the
    driver, rows produced by each task."""

    def __init__(self, raw_options: Mapping[str, str], schema: StructType) -> None:
        self.options = SinkOptions.parse(raw_options)
        self.columns = sink_columns(schema, self.options)
        check_producer_config(self.options)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return WriteResult(produce_rows(self.options, self.columns, iterator))


class CastleWriter(RowWriting, DataSourceWriter):
    """``df.write.format("castle").mode("append")``: at-least-once."""


class CastleStreamWriter(RowWriting, DataSourceStreamWriter):
    """``writeStream.format("castle")``: each micro-batch's rows, at-least-once (a batch
    run again after a failure produces its rows again)."""

    def commit(self, messages: list, batchId: int) -> None:
        """Every record was acknowledged by its task; nothing more to make durable."""

    def abort(self, messages: list, batchId: int) -> None:
        """Records already acknowledged stay written (at-least-once)."""
