"""``castle configs describe|alter``: the configs of a topic, a broker or a group (like kafka-configs.sh).

Altering goes through IncrementalAlterConfigs only: it changes the keys named and leaves
every other override as it is. The older AlterConfigs replaces a resource's whole
override set, so a forgotten key would silently fall back to its default.
``castle topics alter-configs`` is this same code with the resource fixed to a topic.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from broker.admin.output import Report, table
from broker.admin.session import AdminError, Session

# librdkafka sends its GROUP resource type as the GROUP config resource (ConfigResource type 32).
RESOURCE_TYPES = {"topic": ResourceType.TOPIC, "broker": ResourceType.BROKER, "group": ResourceType.GROUP}


def subject(kind: str, name: str) -> str:
    """How a resource is named in messages: ``topic 'orders'``, ``group 'g'``, ``broker 0``."""
    return f"{kind} '{name}'" if kind in ("topic", "group") else f"{kind} {name}"


def source_name(source: Any) -> str:
    """ConfigSource's name (librdkafka hands the source over as a bare int)."""
    if isinstance(source, ConfigSource):
        return source.name
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def entry_data(entry: ConfigEntry) -> dict[str, Any]:
    return {"value": entry.value, "source": source_name(entry.source), "default": entry.is_default,
            "read_only": entry.is_read_only, "sensitive": entry.is_sensitive}


def check_broker(session: Session, name: str) -> None:
    """Refuse a broker id the cluster does not list: librdkafka would wait for it until the deadline."""
    known = session.broker_ids()
    if int(name) not in known:
        raise AdminError(f"broker {name} is not in the cluster (its brokers: {', '.join(map(str, known))})")


def fetch(session: Session, kind: str,
          names: Sequence[str]) -> tuple[dict[str, dict[str, ConfigEntry]], dict[str, AdminError]]:
    """DescribeConfigs for several resources of one kind: entries by resource name, and failures."""
    if not names:
        return {}, {}
    if kind == "broker":
        for name in names:
            check_broker(session, name)
    resources = {name: ConfigResource(RESOURCE_TYPES[kind], name) for name in names}
    futures = session.admin.describe_configs(list(resources.values()), **session.request_options())
    by_name = {name: futures[resource] for name, resource in resources.items()}
    return session.wait_each(by_name, lambda name: subject(kind, name))


def describe(session: Session, kind: str, name: str, non_default: bool) -> Report:
    entries, failures = fetch(session, kind, [name])
    if failures:
        raise failures[name]
    shown = {key: entry for key, entry in sorted(entries[name].items()) if not (non_default and entry.is_default)}
    data = {"resource": {"type": kind, "name": name}, "configs": {key: entry_data(e) for key, e in shown.items()}}
    rows = [(key, "(sensitive)" if e.is_sensitive else e.value, source_name(e.source), e.is_read_only)
            for key, e in shown.items()]
    text = table(("NAME", "VALUE", "SOURCE", "READ-ONLY"), rows) if rows else f"No configs to show for {subject(kind, name)}."
    return Report(data, text)


def alter(session: Session, kind: str, name: str, set_: Mapping[str, str], delete: Sequence[str],
          validate_only: bool) -> Report:
    if kind == "broker":
        check_broker(session, name)
    changes = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in set_.items()]
    changes += [ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in delete]
    resource = ConfigResource(RESOURCE_TYPES[kind], name, incremental_configs=changes)
    futures = session.admin.incremental_alter_configs([resource], validate_only=validate_only, **session.request_options())
    session.wait(futures[resource], subject(kind, name))
    done = []
    if set_:
        done.append("set " + ", ".join(f"{key}={value}" for key, value in set_.items()))
    if delete:
        done.append("deleted " + ", ".join(delete))
    verb = "Validated (nothing changed)" if validate_only else "Altered"
    data = {"resource": {"type": kind, "name": name}, "set": dict(set_), "deleted": list(delete),
            "applied": not validate_only}
    return Report(data, f"{verb} configs of {subject(kind, name)}: {'; '.join(done)}.")
