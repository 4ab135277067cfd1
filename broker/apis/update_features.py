"""UpdateFeatures (key 57), versions 0-2: change the cluster's finalized feature levels, as a
Kafka 4.x controller decides (FeatureControlManager.updateFeatures).

Behaviour: CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster. Each update is checked
in the request's order, and the first one refused refuses them all (nothing is applied half):
INVALID_UPDATE_VERSION with Kafka's message, "The update failed for all features since the
following feature had an error: Invalid update version <level> for feature <name>. <why>",
where <why> is one of:

* an upgrade type other than 1 (upgrade), 2 (safe downgrade), 3 (unsafe downgrade): "The
  controller does not support the given upgrade type.";
* a level below 0: "A feature version cannot be less than 0.";
* a level outside what Castle supports (coordination/finalized_features.py SUPPORTED): "Local
  controller <id> only supports versions <range>", or "... does not support this feature." for
  a feature Castle does not know; a level of 0 for such a feature passes that check and is
  refused with "Feature <name> not found.", as Kafka refuses it;
* a lower level asked as an upgrade: "Can't downgrade the version of this feature without
  setting the upgrade type to either safe or unsafe downgrade."; a higher one asked as a
  downgrade: "Can't downgrade to a newer version.";
* a downgrade of group.version or share.version, which Castle cannot do (it serves those
  protocols always): "Can't downgrade the version of this feature.", Kafka's answer for
  kraft.version.

Otherwise the levels are stored (coordination/feature_store.py: /feature in ZooKeeper, a file
without) unless ``validate_only``; every process of every broker follows them: ApiVersions
answers the new levels with a new epoch, the workers and the transaction coordinator serve
transactions at the new transaction.version, at once (a producer takes a new transaction.version
when it next reads ApiVersions, as with Kafka). Setting a level it already has changes nothing but the epoch.

Version notes: v0 has ``allow_downgrade`` (true: a safe downgrade) where v1 has the upgrade
type; v1 adds ``validate_only``; v2 answers no per-feature results.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from broker.authorization import on_cluster
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from coordination.acls.model import Operation
from coordination.finalized_features import SUPPORTED, Supported

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import UpdateFeaturesRequest

KEY = 57
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _answer(version: int, code: int, message: str | None, features: list[str]) -> Any:
    return build(codec.response_class(KEY, version), {
        "throttle_time": 0, "error_code": code, "error_message": message,
        "results": [{"feature": name, "error_code": 0, "error_message": None} for name in features],
    })


def _error(request: Any, version: int, code: int) -> Any:
    return _answer(version, code, None, [])


def _range(feature: Supported) -> str:
    """Kafka's VersionRange.toString."""
    low, high = feature.min_level, feature.max_level
    return str(low) if low == high else f"{low}-{high}"


def _refusal(node_id: int, name: str, level: int, upgrade_type: int, current: int) -> str | None:
    """Why Kafka's controller would refuse this update (None: it would apply it)."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "The controller does not support the given upgrade type."
    if level < 0:
        return "A feature version cannot be less than 0."
    feature = SUPPORTED.get(name)
    if feature is None and level > 0:
        return f"Local controller {node_id} does not support this feature."
    if feature is not None and not feature.min_level <= level <= feature.max_level:
        return f"Local controller {node_id} only supports versions {_range(feature)}"
    if level < current and upgrade_type == UPGRADE:
        return "Can't downgrade the version of this feature without setting the upgrade type to either safe or " \
               "unsafe downgrade."
    if level > current and upgrade_type != UPGRADE:
        return "Can't downgrade to a newer version."
    if feature is None:
        return f"Feature {name} not found."
    if not feature.downgradable and upgrade_type != UPGRADE and level != current:
        return "Can't downgrade the version of this feature."
    return None


def _upgrade_type(update: Any, version: int) -> int:
    if version == 0:
        return SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
    return int(update.upgrade_type)


@api(KEY, "UpdateFeatures", 0, 2, error_response=_error, authorize=on_cluster(Operation.ALTER))
async def handle_update_features(ctx: RequestContext, request: UpdateFeaturesRequest) -> Response:
    node = ctx.node
    version = ctx.api_version
    features = node.features
    current, _epoch = features.snapshot()
    updates: dict[str, int] = {}
    for update in request.feature_updates:
        name, level = update.feature, int(update.max_version_level)
        why = _refusal(node.node_id, name, level, _upgrade_type(update, version), current.get(name, 0))
        if why is not None:
            return _answer(version, ErrorCode.invalid_update_version,
                           "The update failed for all features since the following feature had an error: "
                           f"Invalid update version {level} for feature {name}. {why}", [])
        updates[name] = level
    names = [update.feature for update in request.feature_updates]
    if getattr(request, "validate_only", False) or not updates:
        return _answer(version, ErrorCode.none, None, names)
    # Stored off the event loop (a ZooKeeper round trip, or a locked file write and fsync).
    await asyncio.get_running_loop().run_in_executor(None, features.update, lambda levels: {**levels, **updates})
    return _answer(version, ErrorCode.none, None, names)
