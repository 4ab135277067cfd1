"""One module per Kafka API (or per family of thin ones); each registers itself with
broker.dispatch.api. ``load_all()`` imports them all (the registry never imports its handlers:
the handlers sit above it)."""

import importlib
import pkgutil


def load_all() -> None:
    """Import every API module so that each registers itself."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
