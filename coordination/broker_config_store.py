"""Where dynamic broker configs are kept: in ZooKeeper in Kafka 3.9's layout, or in a file.

ZooKeeper, as Kafka's AdminZkClient.changeBrokerConfig writes them (ConfigType.BROKER,
entity names a broker id or ``<default>``, ConfigEntityName.DEFAULT), relative to the chroot::

    /config/brokers/<id>                 {"version":1,"config":{"log.retention.ms":"60000"}}
    /config/brokers/<default>            the cluster-wide default (kafka-configs --entity-default)
    /config/changes/config_change_<seq>  {"version":2,"entity_path":"brokers/<id or <default>>"}

The write and its change notification are one conditional transaction
(coordination/zk_update.py), so concurrent writers never lose each other's keys. An entity
whose last config is removed keeps its znode with an empty config, as in Kafka.

The single-machine backend keeps one file (coordination/private_file.py: flocked
read-modify-write, atomic replace, polled for changes every 250 ms)::

    <data_dir>/broker-configs.json   {"version":1,"brokers":{"<default>":{...},"0":{...}}}

Entities are named here as in the protocol: "" is the cluster default, else a broker id.
Values are the text the client sent; checking them is the caller's job.
"""

from __future__ import annotations

import logging
from typing import Callable, Protocol

from kazoo.client import KazooClient

from coordination.group_config_store import EntityConfigZNode, LocalGroupConfigs, ZooKeeperGroupConfigs
from coordination.watchers import Watcher
from coordination.zk_update import CallWrapper

log = logging.getLogger(__name__)

BROKERS_PATH = "/config/brokers"   # ConfigEntityTypeZNode.path(ConfigType.BROKER)
BROKER_ENTITY_TYPE = "brokers"     # ConfigType.BROKER
DEFAULT_ENTITY = "<default>"       # ConfigEntityName.DEFAULT

FILE_NAME = "broker-configs.json"

Overrides = dict[str, str]
Change = Callable[[Overrides], Overrides]


class BrokerConfigStore(Protocol):
    def all(self) -> dict[str, Overrides]:
        """entity ("" for the cluster default, else a broker id) -> its configs, non-empty ones."""
        ...

    def get(self, entity: str) -> Overrides:
        ...

    def update(self, entity: str, change: Change) -> Overrides:
        """Replace the entity's configs with ``change(current)`` (locked or conditional
        read-modify-write: ``change`` may run more than once); the new configs."""
        ...

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now and whenever an entity's configs may have changed; must not block."""
        ...

    def close(self) -> None:
        ...


def znode_name(entity: str) -> str:
    return entity or DEFAULT_ENTITY


def entity_of(znode: str) -> str:
    return "" if znode == DEFAULT_ENTITY else znode


# ----------------------------------------------------------------------------- the stores
# The group configs' stores with the brokers' entity type and names ("<default>" for ""): the
# znode layout, the transaction with its notification and the file are the same.
BrokerConfigZNode = EntityConfigZNode(BROKER_ENTITY_TYPE, znode_name, entity_of)


class ZooKeeperBrokerConfigs(ZooKeeperGroupConfigs):
    """BrokerConfigStore over a started KazooClient (not owned). Methods block."""

    def __init__(self, client: KazooClient, call: CallWrapper | None = None) -> None:
        super().__init__(client, call, BrokerConfigZNode, "broker config")


class LocalBrokerConfigs(LocalGroupConfigs):
    """BrokerConfigStore in ``<data_dir>/broker-configs.json``. Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        super().__init__(data_dir, FILE_NAME, "brokers", "broker config", key_of=znode_name, name_of=entity_of)
