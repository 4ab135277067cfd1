"""Finalized features against a real broker: UpdateFeatures (kio-encoded, every version) with
Kafka's refusals for bad input, ApiVersions answering the levels it finalized on every worker,
the levels kept across a restart, transaction.version taken by the transaction coordinator at
once, and Kafka 4.4's kafka-features.sh describing, upgrading and downgrading them."""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Callable

import pytest

from broker.protocol import codec
from broker.protocol.build import build
from tests.integration.conftest import Broker, start_cluster_broker, wait_until
from tests.integration.kio_client import KioClient
from tests.kafka_cli import missing_tools, run_tool

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

UPDATE_FEATURES, API_VERSIONS = 57, 18
INVALID_UPDATE_VERSION = 95
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
PREFIX = "The update failed for all features since the following feature had an error: "
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh
CLI_VERSION = "4.4.0"


def ask(client: KioClient, api_key: int, version: int, data: dict[str, Any]) -> Any:
    entity = codec.request_class(api_key, version)
    assert entity is not None
    return client.call(api_key, version, build(entity, data))


def update(client: KioClient, updates: dict[str, tuple[int, int]], version: int = 1, validate_only: bool = False) -> Any:
    keys = [{"feature": name, "max_version_level": level, "upgrade_type": kind, "allow_downgrade": kind != UPGRADE}
            for name, (level, kind) in updates.items()]
    return ask(client, UPDATE_FEATURES, version, {"timeout": 10_000, "feature_updates": keys,
                                                  "validate_only": validate_only})


def finalized(client: KioClient) -> tuple[dict[str, int], int, dict[str, tuple[int, int]]]:
    """ApiVersions v3: (finalized levels, their epoch, supported ranges)."""
    answer = ask(client, API_VERSIONS, 3, {"client_software_name": "kio-tests", "client_software_version": "1"})
    return ({f.name: int(f.max_version_level) for f in answer.finalized_features}, int(answer.finalized_features_epoch),
            {f.name: (int(f.min_version), int(f.max_version)) for f in answer.supported_features})


def on_every_worker(broker: Broker, expected: dict[str, int]) -> None:
    """ApiVersions on fresh connections (spread over the workers) answers ``expected``."""
    def settled() -> bool:
        for _ in range(6):
            with KioClient(broker.bootstrap) as client:
                if finalized(client)[0] != expected:
                    return False
        return True
    wait_until(settled, 10, f"every worker to answer {expected}")


def refused(answer: Any, feature: str, level: int, why: str) -> None:
    assert int(answer.error_code) == INVALID_UPDATE_VERSION, answer
    assert answer.error_message == f"{PREFIX}Invalid update version {level} for feature {feature}. {why}", answer


DEFAULTS = {"transaction.version": 2, "group.version": 1, "share.version": 1}


def test_bad_updates_are_refused_as_kafka_refuses_them_and_nothing_is_applied(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        levels, epoch, supported = finalized(client)
        assert (levels, supported) == (DEFAULTS, {"transaction.version": (0, 2), "group.version": (0, 1),
                                                  "share.version": (0, 1)})
        refused(update(client, {"transaction.version": (3, UPGRADE)}), "transaction.version", 3,
                "Local controller 0 only supports versions 0-2")
        refused(update(client, {"transaction.version": (-1, UPGRADE)}), "transaction.version", -1,
                "A feature version cannot be less than 0.")
        refused(update(client, {"transaction.version": (1, 7)}), "transaction.version", 1,
                "The controller does not support the given upgrade type.")
        refused(update(client, {"transaction.version": (1, UPGRADE)}), "transaction.version", 1,
                "Can't downgrade the version of this feature without setting the upgrade type to either safe or "
                "unsafe downgrade.")
        refused(update(client, {"no.such.feature": (1, UPGRADE)}), "no.such.feature", 1,
                "Local controller 0 does not support this feature.")
        refused(update(client, {"no.such.feature": (0, UPGRADE)}), "no.such.feature", 0, "Feature no.such.feature not found.")
        refused(update(client, {"group.version": (0, SAFE_DOWNGRADE)}), "group.version", 0,
                "Can't downgrade the version of this feature.")
        refused(update(client, {"share.version": (0, UNSAFE_DOWNGRADE)}), "share.version", 0,
                "Can't downgrade the version of this feature.")
        # One bad update refuses the good one beside it.
        both = update(client, {"transaction.version": (1, SAFE_DOWNGRADE), "group.version": (2, UPGRADE)})
        refused(both, "group.version", 2, "Local controller 0 only supports versions 0-1")
        assert both.results == ()
        # Validated only: answered as applied, not applied.
        checked = update(client, {"transaction.version": (1, SAFE_DOWNGRADE)}, validate_only=True)
        assert (int(checked.error_code), [(r.feature, int(r.error_code)) for r in checked.results]) == (
            0, [("transaction.version", 0)])
        assert finalized(client)[:2] == (DEFAULTS, epoch)


def test_transaction_version_goes_down_and_up_live_and_survives_a_restart(broker: Broker) -> None:
    with KioClient(broker.bootstrap) as client:
        _levels, before, _ = finalized(client)
        done = update(client, {"transaction.version": (1, SAFE_DOWNGRADE)}, version=2)
        assert (int(done.error_code), done.error_message) == (0, None)
        assert not hasattr(done, "results")  # v2 answers no per-feature results
        levels, after, _ = finalized(client)
        assert levels == {**DEFAULTS, "transaction.version": 1} and after > before
    on_every_worker(broker, {**DEFAULTS, "transaction.version": 1})
    wait_until(lambda: "coordinator: transaction.version is now 1" in broker.stderr(20_000), 10,
               "the transaction coordinator to take level 1")
    stored = json.loads(open(os.path.join(broker.log_dir, "features.json")).read())
    assert stored["features"] == {"group.version": {"max_version_level": 1}, "share.version": {"max_version_level": 1},
                                  "transaction.version": {"max_version_level": 1}}
    broker.restart()
    on_every_worker(broker, {**DEFAULTS, "transaction.version": 1})
    with KioClient(broker.bootstrap) as client:
        assert finalized(client)[1] == after  # the stored epoch, not the new process's start time
        # Down to 0: the feature is no longer listed as finalized (Kafka lists levels above 0).
        assert int(update(client, {"transaction.version": (0, UNSAFE_DOWNGRADE)}, version=0).error_code) == 0
        assert finalized(client)[0] == {"group.version": 1, "share.version": 1}
        assert int(update(client, {"transaction.version": (2, UPGRADE)}).error_code) == 0
    on_every_worker(broker, DEFAULTS)
    wait_until(lambda: broker.stderr(3000).count("coordinator: transaction.version is now 2") >= 1, 10,
               "the transaction coordinator to take level 2 again")


@pytest.mark.kafka_cli
def test_kafka_features_describes_upgrades_and_downgrades(broker: Broker) -> None:
    missing = missing_tools(CLI_VERSION)
    if missing:
        pytest.fail(f"Kafka's CLI needs {', '.join(missing)} on PATH (apt-get install default-jre-headless maven)")

    def features(*args: str) -> Any:
        return run_tool(FEATURE_COMMAND, ["--bootstrap-server", broker.bootstrap, *args], version=CLI_VERSION)

    def described() -> dict[str, str]:
        done = features("describe")
        assert done.returncode == 0, done
        rows = {}
        for line in done.stdout.splitlines():
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            assert int(fields["Epoch"]) > 0, line
            rows[fields["Feature"]] = (f"{fields['SupportedMinVersion']}-{fields['SupportedMaxVersion']} "
                                       f"{fields['FinalizedVersionLevel']}")
        return rows

    assert described() == {"transaction.version": "0-2 2", "group.version": "0-1 1", "share.version": "0-1 1"}
    down = features("downgrade", "--feature", "transaction.version=1")
    assert down.returncode == 0 and "transaction.version was downgraded to 1." in down.stdout, down
    time.sleep(0.5)  # the other worker's file watch
    assert described()["transaction.version"] == "0-2 1"
    dry = features("upgrade", "--feature", "transaction.version=2", "--dry-run")
    assert dry.returncode == 0 and "transaction.version can be upgraded to 2." in dry.stdout, dry
    assert described()["transaction.version"] == "0-2 1"
    bad = features("downgrade", "--feature", "group.version=0")
    assert bad.returncode != 0
    assert bad.stdout.strip() == (f"Could not downgrade group.version to 0. {PREFIX}Invalid update version 0 for "
                                  "feature group.version. Can't downgrade the version of this feature."), bad
    up = features("upgrade", "--feature", "transaction.version=2")
    assert up.returncode == 0 and "transaction.version was upgraded to 2." in up.stdout, up
    time.sleep(0.5)
    assert described()["transaction.version"] == "0-2 2"


@pytest.mark.zookeeper
def test_a_zookeeper_cluster_shares_the_levels_in_kafkas_feature_znode(
        broker_factory: Callable[..., Broker], zk_connect: str) -> None:
    """Levels finalized through one broker are answered by the other, stored in /feature as
    Kafka's FeatureZNode (version 2, status enabled, max_version_level per feature); a
    refused update leaves the znode as it was; the controller named in refusals is the broker
    that answered."""
    from kazoo.client import KazooClient

    first = start_cluster_broker(broker_factory, zk_connect, node_id=1)
    second = start_cluster_broker(broker_factory, zk_connect, node_id=2)
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=10)
    try:
        assert client.exists("/feature") is None  # nothing finalized yet: the defaults
        with KioClient(first.bootstrap) as kio:
            assert int(update(kio, {"transaction.version": (1, SAFE_DOWNGRADE)}).error_code) == 0
        data, stat = client.get("/feature")
        doc = json.loads(data)
        assert {k: doc[k] for k in ("version", "status", "features")} == {
            "version": 2, "status": 1, "features": {"transaction.version": {"max_version_level": 1},
                                                    "group.version": {"max_version_level": 1},
                                                    "share.version": {"max_version_level": 1}}}
        on_every_worker(second, {**DEFAULTS, "transaction.version": 1})
        with KioClient(second.bootstrap) as kio:
            assert finalized(kio)[1] == doc["epoch"]
            refused(update(kio, {"transaction.version": (5, UPGRADE)}), "transaction.version", 5,
                    "Local controller 2 only supports versions 0-2")
        assert client.get("/feature")[1].version == stat.version
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("broker", [{"num.partitions": 2}], indirect=True)
def test_a_live_downgrade_to_transaction_version_1_is_served_at_once(broker: Broker) -> None:
    """Lowered by UpdateFeatures on a running broker, transaction.version 1 holds as if the
    broker had been started with it: Produce v12 no longer adds partitions (refused until
    AddPartitionsToTxn adds them), and EndTxn v5 no longer bumps the epoch."""
    from tests.integration.protocol.test_transactions_v2 import a_transaction_at_version_1

    topic, txn = "live-tv1", "live-tv1-producer"
    with KioClient(broker.bootstrap) as client:
        assert int(update(client, {"transaction.version": (1, SAFE_DOWNGRADE)}).error_code) == 0
    on_every_worker(broker, {**DEFAULTS, "transaction.version": 1})
    wait_until(lambda: "coordinator: transaction.version is now 1" in broker.stderr(20_000), 10,
               "the transaction coordinator to take level 1")
    with KioClient(broker.bootstrap) as client:
        a_transaction_at_version_1(client, topic, txn)
