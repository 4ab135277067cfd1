"""ApiVersions (key 18), versions 0-4.

Behaviour: the answer is built from broker.dispatch.REGISTRY, so what is advertised is
exactly what is implemented. Answers are encoded once per version and cached. A request
of a version we do not speak gets error 35 (UNSUPPORTED_VERSION) with our ranges in the
v0 body (the response header is always v0), so the client retries with a version we
speak, as Kafka's broker does.

Features (v3+): the levels Castle supports (coordination/finalized_features.py SUPPORTED:
``transaction.version`` 0-2; ``group.version`` and ``share.version`` 1, the consumer and share
group protocols, listed once their heartbeat APIs are registered: a feature is advertised only
when it is served) and the cluster's finalized levels with their epoch, as UpdateFeatures
(broker/apis/update_features.py) left them, else the defaults (transaction.version at the
broker's setting). A Kafka 4.x Java producer uses transactions v2 (KIP-890: EndTxn v5, Produce
v12, TxnOffsetCommit v5) only when it sees level 2 finalized. A level of 0 is not listed
(Kafka lists finalized levels above 0).

Version notes: v1 adds throttle_time; v3 is flexible and adds client software name and
version (kept on the connection: client-metrics subscriptions match them) and the
supported/finalized features; v4 is v3 (it only tells the
broker the client can handle an UNSUPPORTED_VERSION answer).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from broker.context import RequestContext
from broker.dispatch import api, supported_ranges
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.finalized_features import SUPPORTED, Supported

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import ApiVersionsRequest

KEY = 18
FEATURES_FROM = 3
# feature -> the API whose registration means it is served
SERVED_BY = {"group.version": 68, "share.version": 76}


def advertised_features() -> list[Supported]:
    served = {k for k, _lo, _hi in supported_ranges()}
    return [f for f in SUPPORTED.values() if SERVED_BY.get(f.name, KEY) in served]


@functools.lru_cache(maxsize=64)
def _answer(version: int, error_code: int = 0, finalized: tuple[tuple[str, int], ...] = (), epoch: int = -1) -> bytes:
    body: dict[str, Any] = {
        "error_code": error_code,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in supported_ranges()],
        "throttle_time": 0,
    }
    if version >= FEATURES_FROM:
        features = advertised_features()
        names = {f.name for f in features}
        body["supported_features"] = [{"name": f.name, "min_version": f.min_level, "max_version": f.max_level}
                                      for f in features]
        body["finalized_features_epoch"] = epoch
        body["finalized_features"] = [{"name": name, "max_version_level": level, "min_version_level": level}
                                      for name, level in finalized if level > 0 and name in names]
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
    levels, epoch = ctx.node.features.snapshot()
    return _answer(ctx.api_version, 0, tuple(sorted(levels.items())), epoch)
