"""The group configs reader of a broker process, given this broker's settings.

coordination/group_configs reads the broker settings it needs (the synonyms and bounds of the
group config keys) as ``BrokerValues``; this is where BrokerConfig becomes one: every such
setting the broker declares, and which of them were given a value other than their default
(DescribeConfigs answers those as STATIC_BROKER_CONFIG). Settings Castle does not declare keep
Kafka's defaults.
"""

from __future__ import annotations

from broker.config import BY_NAME, BrokerConfig
from coordination.group_config_keys import KAFKA_BROKER_DEFAULTS, BrokerValues, Value
from coordination.group_config_store import GroupConfigStore
from coordination.group_configs import GroupConfigs


def broker_values(config: BrokerConfig) -> BrokerValues:
    values: dict[str, Value] = {}
    set_names = set()
    for name in KAFKA_BROKER_DEFAULTS:
        setting = BY_NAME.get(name)
        if setting is None:
            continue
        value = config.value(name)
        values[name] = value
        if value != setting.default:
            set_names.add(name)
    return BrokerValues(values, frozenset(set_names))


def open_group_configs(config: BrokerConfig, store: GroupConfigStore) -> GroupConfigs:
    """A started reader (it loads the store now: blocking, call it off the event loop)."""
    reader = GroupConfigs(store, broker_values(config))
    reader.start()
    return reader
