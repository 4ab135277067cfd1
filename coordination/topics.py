"""The topic model both topic registries share (the local file, coordination/local_topics.py,
and ZooKeeper, coordination/zookeeper_topics.py): what a topic is, Kafka's rules for its
name, and the error a registry change raises.

Why a module: the two registries, the backend interface and the broker's handlers all speak
of the same ``TopicInfo`` and ``TopicRegistryError``; none of them should have to load
another registry's code to name them.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Mapping

MAX_TOPIC_NAME = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


class TopicRegistryError(Exception):
    """A registry change that cannot be made; ``code`` is the Kafka error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate_topic_name(name: str) -> str | None:
    """Kafka's Topic.validate rules; returns why the name is invalid, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_NAME.match(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)

    def has_partition(self, partition: int) -> bool:
        return 0 <= partition < self.partitions
