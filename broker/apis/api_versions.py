"""ApiVersions (key 18), versions 0-4.

Behaviour: the answer is built from broker.dispatch.REGISTRY, so what is advertised is
exactly what is implemented. Answers are encoded once per version and cached. A request
of a version we do not speak gets error 35 (UNSUPPORTED_VERSION) with our ranges in the
v0 body (the response header is always v0), so the client retries with a version we
speak, as Kafka's broker does.

Features (v3+): ``transaction.version`` is supported 0-2 and finalized at the broker's
``transaction.version`` setting (default 2), as a Kafka 4.x broker reports it; a Kafka 4.x
Java producer uses transactions v2 (KIP-890: EndTxn v5, Produce v12, TxnOffsetCommit v5)
only when it sees level 2 finalized. ``group.version`` 1 (the consumer group protocol,
KIP-848) and ``share.version`` 1 (share groups, KIP-932) are supported and finalized at 1
once their heartbeat APIs are registered: a feature is advertised only when it is served. A
level of 0 is not listed (Kafka lists finalized levels above 0). The finalized features' epoch is the process's start time in
milliseconds, so a client that reconnects after a restart takes a changed level.

Version notes: v1 adds throttle_time; v3 is flexible and adds client software name and
version (kept on the connection: client-metrics subscriptions match them) and the
supported/finalized features; v4 is v3 (it only tells the
broker the client can handle an UNSUPPORTED_VERSION answer).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from broker.context import RequestContext
from broker.dispatch import api, supported_ranges
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from broker.protocol.requests import ApiVersionsRequest

KEY = 18
FEATURES_FROM = 3
TRANSACTION_VERSION = "transaction.version"
TRANSACTION_VERSION_SUPPORTED = (0, 2)
# (feature, the API whose registration means it is served): supported 0-1, finalized at 1.
GROUP_FEATURES = (("group.version", 68), ("share.version", 76))
FEATURES_EPOCH = int(time.time() * 1000)


@functools.cache
def _answer(version: int, error_code: int = 0, transaction_version: int = 2) -> bytes:
    body: dict[str, Any] = {
        "error_code": error_code,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported_ranges()],
        "throttle_time": 0,
    }
    if version >= FEATURES_FROM:
        low, high = TRANSACTION_VERSION_SUPPORTED
        served = {k for k, _lo, _hi in supported_ranges()}
        groups = [name for name, key in GROUP_FEATURES if key in served]
        body["supported_features"] = [{"name": TRANSACTION_VERSION, "min_version": low, "max_version": high}] + [
            {"name": name, "min_version": 0, "max_version": 1} for name in groups]
        body["finalized_features_epoch"] = FEATURES_EPOCH
        finalized = [(TRANSACTION_VERSION, transaction_version)] if transaction_version > 0 else []
        body["finalized_features"] = [{"name": name, "max_version_level": level, "min_version_level": level}
                                      for name, level in finalized + [(name, 1) for name in groups]]
    return codec.encode_body(build(codec.response_class(KEY, version), body))


def unsupported_version_response() -> bytes:
    return _answer(0, int(ErrorCode.unsupported_version))


def _error(request: Any, version: int, code: int) -> bytes:
    return _answer(version, code)


@api(KEY, "ApiVersions", 0, 4, error_response=_error)
def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> bytes:
    if ctx.api_version >= FEATURES_FROM:  # client telemetry matches subscriptions on these
        ctx.connection.client_software = (getattr(request, "client_software_name", None),
                                          getattr(request, "client_software_version", None))
    return _answer(ctx.api_version, 0, ctx.node.config.get_int("transaction.version"))
