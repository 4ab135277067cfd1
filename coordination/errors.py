"""The coordination backend's own errors (coordination/backend.py names them for its callers).

A module of their own, importing nothing of the project's, so that what raises them (the
ZooKeeper call wrappers under every store) need not import the backend interface that
names those stores.
"""

from __future__ import annotations


class CoordinationError(Exception):
    """Base of the backend's own errors."""


class CoordinationUnavailable(CoordinationError):
    """ZooKeeper cannot be reached (within the retry deadline), or the backend is closed."""


class BrokerIdInUse(CoordinationError):
    """Another live broker registered the same node id."""


class NotCoordinator(CoordinationError):
    """A coordinator-only write from a process that is not (or no longer) the coordinator."""
