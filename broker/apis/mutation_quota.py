"""controller_mutation_rate for one request (KIP-599, Kafka's ControllerMutationQuota).

CreateTopics, CreatePartitions and DeleteTopics count the partitions each topic creates,
adds or deletes against the client's controller_mutation_rate (resolved as every client
quota is, broker/quotas/book.py; measured by broker/quotas/mutation_buckets.py):

* strict, from CreateTopics v6, CreatePartitions v3, DeleteTopics v5 (the versions whose
  clients know THROTTLING_QUOTA_EXCEEDED): while the client's bucket is below zero, a
  topic is refused with THROTTLING_QUOTA_EXCEEDED and the time until it refills; a topic
  taken may leave the bucket below zero, so a request can exceed the quota once and the
  next are refused;
* permissive, for older versions: every topic is applied, and the answer carries the time
  until the bucket refills.

The answer's throttle_time_ms is that time, less what passed since it was measured
(Kafka's AbstractControllerMutationQuota.throttleTime), and the connection is muted that
long (``finish``). A request quota's throttle, when larger, is written over it later
(broker/network/request_quota.py): the answer carries the maximum, as in Kafka.
"""

from __future__ import annotations

import time

from broker.context import RequestContext
from broker.protocol.errors import ErrorCode, KafkaError
from broker.quotas import mutation_buckets
from broker.quotas.book import MUTATION

EXCEEDED_MESSAGE = "The throttling quota has been exceeded."  # Errors.THROTTLING_QUOTA_EXCEEDED.message


class MutationQuota:
    """One request's view of its client's bucket; ``record`` per topic, then ``finish``."""

    def __init__(self, ctx: RequestContext, strict_since: int) -> None:
        self._ctx = ctx
        self._found: tuple[float, str] | None = None
        self.strict = ctx.api_version >= strict_since
        self._samples, self._window_ms = 0, 0
        if ctx.node.quotas.table.mutation:
            principal = ctx.connection.auth.principal
            self._found = ctx.node.quotas.table.resolve(MUTATION, principal.partition(":")[2] or principal,
                                                        ctx.client_id or "")
            config = ctx.node.config
            self._samples = config.get_int("controller.quota.window.num")
            self._window_ms = config.get_int("controller.quota.window.size.seconds") * 1000
        self._throttle_ms = 0
        self._measured = 0.0

    def record(self, partitions: int) -> None:
        """Count ``partitions`` mutated by one topic; KafkaError THROTTLING_QUOTA_EXCEEDED when
        strict and the quota is exhausted (nothing counted then)."""
        if self._found is None:
            return
        bound, counted = self._found
        taken, throttle_ms = mutation_buckets.shared().take(counted, partitions, bound, self._samples, self._window_ms,
                                                            self.strict)
        if throttle_ms:
            self._throttle_ms, self._measured = throttle_ms, time.monotonic()
        if not taken:
            raise KafkaError(ErrorCode.throttling_quota_exceeded, EXCEEDED_MESSAGE)

    def give_back(self, partitions: int) -> None:
        """The topic recorded was not mutated after all (it existed, the registry refused it)."""
        if self._found is not None:
            bound, counted = self._found
            mutation_buckets.shared().give_back(counted, partitions, bound, self._samples, self._window_ms)

    @property
    def throttle_time_ms(self) -> int:
        if not self._throttle_ms:
            return 0
        return max(0, self._throttle_ms - round((time.monotonic() - self._measured) * 1000))

    def finish(self) -> int:
        """The answer's throttle_time_ms; the connection is muted that long."""
        throttle_ms = self.throttle_time_ms
        if throttle_ms:
            self._ctx.connection.mute_after_answer(throttle_ms)
        return throttle_ms
