"""request_percentage (KIP-124, Kafka's ClientRequestQuotaManager): a client's share of the
broker's request-handling time.

What is measured. Kafka counts the time a request spends on its request handler threads
(and, without throttling, on its network threads) as a percentage of one thread's time:
``nanos * 100 / 1e9`` per request, over the same sampled windows as the byte rates, so a
quota of 50 lets a client keep half of one thread busy. Here a request's time is its
handler's time on the worker's event loop: the call for a synchronous handler; for a
coroutine, every step it runs (``Timed``), from the first, inside the read that found the
request, to the one that builds the answer, plus encoding a kio answer. Time the request
waits (for an owner on another worker, the coordinator process, ZooKeeper, a long poll)
is not the worker's and is not counted; the other process's own work for it (the owning
worker's append, the coordinator process's group logic, a ZooKeeper write on the admin
thread) is not measured either: that is the part this count leaves out.

When it is decided. As Kafka's sendResponseMaybeThrottle does, once the answer is ready:
the time is recorded against the client's quota entity (shared by all workers, broker/
quotas/shared_counters.py), and over the quota the answer carries the throttle time
(the larger of it and a byte-rate throttle the handler already wrote, as Kafka takes the
maximum) and the connection is muted that long (KIP-219). As in Kafka the throttle is at
most one quota window (ClientRequestQuotaManager.maxThrottleTimeMs). Two differences: a
Fetch throttled for its time keeps its records (Kafka answers it empty; the byte rate is
the consumer_byte_rate's business, broker/apis/fetch.py), and a client that pipelines is
held from its first answer over the quota, not before: Kafka reads one request of a
connection at a time, here up to queued.max.requests may be in flight when it comes.

Exempt, as Kafka's sendResponseExemptThrottle: the cluster's own requests (a follower's
Fetch, WriteTxnMarkers, the share-group state APIs), ApiVersions and the SASL requests (a
client must be able to connect and authenticate: Kafka answers them unthrottled before
authentication, and throttles an ApiVersions after it; here never), and acks=0 Produce
(nothing is answered).

Cost: with no request_percentage anywhere the connection tests one attribute per request;
with one configured, a client without a quota costs a cached lookup more.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Generator

from broker.context import NO_RESPONSE, RawResponse, RequestContext
from broker.protocol import codec
from broker.quotas import throttle_field
from broker.quotas.shared_counters import REQUEST

if TYPE_CHECKING:
    from broker.dispatch import HandlerSpec

FETCH = 1
PERCENT = 100.0  # a second of one thread's time, in request_percentage's unit
# ApiVersions, SaslHandshake, SaslAuthenticate; WriteTxnMarkers and the share-group state
# APIs (ApiKeys.clusterAction): never throttled.
EXEMPT = frozenset({18, 17, 36, 27, 83, 84, 85, 86, 87})


def percentage(seconds: float) -> float:
    """Kafka's nanosToPercentage: what a request's handler time counts against the quota."""
    return seconds * PERCENT


def bounded(throttle_ms: int, window_ms: int) -> int:
    """Kafka's boundedThrottleTime: a request quota's throttle is at most one window."""
    return min(throttle_ms, window_ms)


def handle(ctx: RequestContext, spec: "HandlerSpec", request: Any) -> Any:
    """Run the handler as the connection would, timed, when the client has a request quota:
    a synchronous handler's answer, or a coroutine (``Timed``) for an async one."""
    if ctx.api_key in EXEMPT or (ctx.api_key == FETCH and request.replica_id >= 0):
        return spec.handle(ctx, request)
    principal = ctx.connection.auth.principal
    found = ctx.node.quotas.table.resolve(REQUEST, principal.partition(":")[2] or principal, ctx.client_id or "")
    if found is None:
        return spec.handle(ctx, request)
    started = time.perf_counter()
    if spec.is_async:
        return Timed(spec.handle(ctx, request), lambda answer, spent: _answered(ctx, found, answer, spent), started)
    try:
        answer = spec.handle(ctx, request)
    except BaseException:
        _answered(ctx, found, None, time.perf_counter() - started)
        raise
    return _answered(ctx, found, answer, time.perf_counter() - started)


def _answered(ctx: RequestContext, found: tuple[float, str], answer: Any, spent: float) -> Any:
    """Record ``spent`` seconds (the answer's encoding too); over the quota, write the
    throttle into the answer and mute the connection. ``answer`` None: the handler failed
    (its error answer is built later, without the field: the connection is muted all the same)."""
    if answer is NO_RESPONSE:
        return answer  # acks=0: exempt, as Kafka's sendNoOpResponseExemptThrottle
    if answer is not None and not isinstance(answer, (bytes, bytearray, RawResponse)):
        started = time.perf_counter()
        answer = codec.encode_body(answer)
        spent += time.perf_counter() - started
    book = ctx.node.quotas
    bound, counted = found
    counters = book.counters
    throttle_ms = bounded(counters.throttle_ms(counted, REQUEST, percentage(spent), bound), counters.window_ms)
    if not throttle_ms:
        return answer
    ctx.node.stats["quota_throttled_request"] += 1
    ctx.connection.mute_after_answer(throttle_ms)
    if isinstance(answer, RawResponse):
        throttle_field.raw_written(ctx.api_key, ctx.api_version, answer.chunks, throttle_ms)
    elif answer is not None:
        answer = throttle_field.written(ctx.api_key, ctx.api_version, bytes(answer), throttle_ms)
    return answer


class Timed(Coroutine[Any, Any, Any]):
    """A handler's coroutine whose steps are timed: driven like any coroutine (broker/network/
    eager.py steps it, then a Task), it adds up the time each ``send``/``throw`` takes and,
    when the handler returns, hands its answer and that time to ``done``, whose result is
    the answer the connection gets."""

    __slots__ = ("_coro", "_done", "_spent", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], done: Callable[[Any, float], Any], started: float) -> None:
        self._coro = coro
        self._done = done
        self._spent = 0.0
        self._first: float | None = started  # the first step also counts the call that made the coroutine

    def send(self, value: Any) -> Any:
        return self._step(self._coro.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if val is None and tb is None:
            return self._step(self._coro.throw, typ)
        return self._step(lambda _value: self._coro.throw(typ, val, tb), None)

    def _step(self, step: Callable[[Any], Any], value: Any) -> Any:
        started = self._first if self._first is not None else time.perf_counter()
        self._first = None
        try:
            yielded = step(value)
        except StopIteration as stop:
            raise StopIteration(self._done(stop.value, self._spent + time.perf_counter() - started)) from None
        except BaseException:
            self._done(None, self._spent + time.perf_counter() - started)
            raise
        self._spent += time.perf_counter() - started
        return yielded

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        raise TypeError("a Timed handler is driven by send(), not awaited")
