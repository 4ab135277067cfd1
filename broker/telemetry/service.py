"""``WorkerTelemetry``: one worker's client telemetry, what its handlers (broker/apis/telemetry.py,
broker/apis/client_metrics_configs.py) and its housekeeping use."""

from __future__ import annotations

import logging

from broker.telemetry.exporter import TelemetryTable
from broker.telemetry.instances import ClientInstances
from broker.telemetry.subscriptions import Subscription, Subscriptions
from coordination.client_metrics_store import ClientMetricsStore

log = logging.getLogger(__name__)


class WorkerTelemetry:
    def __init__(self, store: ClientMetricsStore, max_bytes: int) -> None:
        self.subscriptions = Subscriptions(store)
        self.instances = ClientInstances(self._current)
        self.table = TelemetryTable()
        self.max_bytes = max_bytes

    def _current(self) -> tuple[int, dict[str, Subscription]]:
        subscriptions = self.subscriptions
        return subscriptions.version, subscriptions.table

    def start(self) -> None:
        """Load the subscriptions (blocking) and follow the store."""
        self.subscriptions.start()

    def write(self, run_dir: str, worker: int) -> None:
        self.instances.expire()
        self.table.write(run_dir, worker)

    def close(self) -> None:
        self.subscriptions.close()
