"""``castle topics reassign`` and ``castle topics reassignments``: move partitions' replicas.

confluent-kafka's AdminClient has no AlterPartitionReassignments or
ListPartitionReassignments (librdkafka lacks them), so these two go to the first
bootstrap broker over the Kafka protocol with Castle's own small client
(broker/partitions/remote_partition.py), kio encoding the bodies. Any Kafka broker would answer
them the same way; kafka-reassign-partitions.sh does the same job with its JSON files.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session
from broker.partitions.remote_partition import RemotePartitionClient
from broker.protocol.errors import ErrorCode, KafkaError

ALTER, LIST = 45, 46


def _call(session: Session, api_key: int, version: int, fields: dict[str, Any]) -> Any:
    host, _, port = session.bootstrap.split(",")[0].rpartition(":")

    async def once() -> Any:
        client = RemotePartitionClient(host, int(port), "castle-admin", timeout=session.remaining())
        try:
            return await client.call(api_key, version, fields)
        finally:
            await client.close()

    try:
        return asyncio.run(once())
    except KafkaError as exc:
        raise session.unreachable(str(exc)) if exc.code in (ErrorCode.network_exception, ErrorCode.request_timed_out) \
            else AdminError(str(exc), int(exc.code)) from None


def reassign(session: Session, topic: str, partitions: Sequence[int], replicas: list[int] | None) -> Report:
    """Move ``partitions`` of ``topic`` onto ``replicas`` (the first: the preferred leader),
    or cancel their reassignment (None)."""
    answer = _call(session, ALTER, 0, {"timeout": int(session.remaining() * 1000), "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "replicas": replicas} for p in partitions]}]})
    if answer.error_code:
        raise AdminError(f"{ErrorCode(answer.error_code).name}: {answer.error_message}", int(answer.error_code))
    results = [{"topic": topic, "partition": p.partition_index, "error": ErrorCode(p.error_code).name if p.error_code else None,
                "message": p.error_message} for t in answer.responses for p in t.partitions]
    failures = [f"{r['topic']}-{r['partition']}: {r['error']}: {r['message'] or ''}".rstrip(": ") for r in results if r["error"]]
    what = "cancelled" if replicas is None else f"moving to {','.join(map(str, replicas))}"
    ok = [f"{r['topic']}-{r['partition']}: {what}" for r in results if not r["error"]]
    return Report(results, "\n".join(ok), failures=failures)


def reassignments(session: Session, topics: Sequence[str]) -> Report:
    """The reassignments still in progress."""
    answer = _call(session, LIST, 0, {"timeout": int(session.remaining() * 1000), "topics": None})
    rows = [{"topic": t.name, "partition": p.partition_index, "replicas": list(p.replicas),
             "adding": list(p.adding_replicas), "removing": list(p.removing_replicas)}
            for t in answer.topics for p in t.partitions if not topics or t.name in topics]
    text = table(["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                 [[r["topic"], r["partition"], r["replicas"], r["adding"], r["removing"]] for r in rows]) \
        if rows else "No partition reassignment in progress."
    return Report(rows, text)
