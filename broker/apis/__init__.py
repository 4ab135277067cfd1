"""One module per Kafka API (or per family of thin ones); each registers itself with
broker.dispatch.api. ``load_all()`` imports them all, and the coordinator process's API
modules (broker/coordinator/, whose worker halves register here too). The registry never
imports its handlers: the handlers sit above it."""

import importlib
import pkgutil

from broker.coordinator import api as coordinator_apis


def load_all() -> None:
    """Import every API module so that each registers itself."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    coordinator_apis.load_all()
