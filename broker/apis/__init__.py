"""One module per Kafka API (or per family of thin ones); each registers itself with
broker.dispatch.api. ``load_all()`` imports them all, and the coordinator process's API
modules (broker/coordinator/, whose worker halves register here too). The registry never
imports its handlers: the handlers sit above it."""

import importlib
import pkgutil
import sys

from broker import coordinator


def load_all() -> None:
    """Import every API module of both handler packages so that each registers itself."""
    for package in (sys.modules[__name__], coordinator):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
