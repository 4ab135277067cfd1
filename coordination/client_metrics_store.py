"""Where client-metrics subscriptions (KIP-714, ConfigResource type CLIENT_METRICS) are kept.

The same store as groups' configs (coordination/group_config_store.py), for Kafka's entity
type "client-metrics" (ConfigType.CLIENT_METRICS), relative to the chroot::

    /config/client-metrics/<sanitized name>  {"version":1,"config":{"metrics":"org.apache.kafka.producer.","interval.ms":"1000"}}
    /config/changes/config_change_<seq>      {"version":2,"entity_path":"client-metrics/<sanitized name>"}

or, without ZooKeeper, ``<data_dir>/client-metrics.json``
(``{"version":1,"client-metrics":{"<name>":{"<key>":"<value>"}}}``). Values are the text the
client sent; validating them is broker/telemetry/subscriptions.py's job.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from coordination.group_config_store import (
    EntityConfigZNode,
    GroupConfigStore,
    LocalGroupConfigs,
    ZooKeeperGroupConfigs,
)
from coordination.zk_update import CallWrapper

ENTITY_TYPE = "client-metrics"   # ConfigType.CLIENT_METRICS
CLIENT_METRICS_PATH = f"/config/{ENTITY_TYPE}"
FILE_NAME = "client-metrics.json"

ClientMetricsStore = GroupConfigStore  # name -> its config, with the same read-modify-write and watch
ClientMetricsZNode = EntityConfigZNode(ENTITY_TYPE)


def zookeeper_client_metrics(client: KazooClient, call: CallWrapper | None = None) -> ZooKeeperGroupConfigs:
    return ZooKeeperGroupConfigs(client, call, znode=ClientMetricsZNode, what="client metrics")


def local_client_metrics(data_dir: str) -> LocalGroupConfigs:
    return LocalGroupConfigs(data_dir, FILE_NAME, key=ENTITY_TYPE, what="client metrics config")
