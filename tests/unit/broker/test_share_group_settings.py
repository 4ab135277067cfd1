"""The group.share.* settings: Kafka's names and defaults, each within Kafka's bounds, and
checked against each other as Kafka's GroupCoordinatorConfig checks them."""

from __future__ import annotations

import pytest

from broker.config import ConfigError, load_config
from broker.process.coordinator_main import share_settings_from


def test_the_defaults_are_kafkas() -> None:
    settings = share_settings_from(load_config(None, {}))
    assert (settings.session_timeout_ms, settings.heartbeat_interval_ms, settings.max_size) == (45_000, 5_000, 200)


def test_values_within_the_bounds_are_taken() -> None:
    config = load_config(None, {"group.share.session.timeout.ms": "50000", "group.share.heartbeat.interval.ms": "6000",
                                "group.share.max.size": "1000"})
    settings = share_settings_from(config)
    assert (settings.session_timeout_ms, settings.heartbeat_interval_ms, settings.max_size) == (50_000, 6_000, 1000)
    short = load_config(None, {"group.share.min.session.timeout.ms": "1000", "group.share.session.timeout.ms": "1000",
                               "group.share.min.heartbeat.interval.ms": "100", "group.share.heartbeat.interval.ms": "100"})
    assert share_settings_from(short).session_timeout_ms == 1000


@pytest.mark.parametrize("overrides, message", [
    ({"group.share.max.size": "0"}, "bad value for group.share.max.size"),
    ({"group.share.max.size": "1001"}, "bad value for group.share.max.size"),
    ({"group.share.session.timeout.ms": "0"}, "bad value for group.share.session.timeout.ms"),
    ({"group.share.session.timeout.ms": "30000"},
     "group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"group.share.session.timeout.ms": "70000"},
     "group.share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ({"group.share.heartbeat.interval.ms": "1000"},
     "group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ({"group.share.heartbeat.interval.ms": "20000"},
     "group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"),
    ({"group.share.max.heartbeat.interval.ms": "4000"},
     "group.share.max.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ({"group.share.max.session.timeout.ms": "40000"},
     "group.share.max.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"group.share.min.session.timeout.ms": "1000", "group.share.session.timeout.ms": "5000",
      "group.share.max.heartbeat.interval.ms": "15000", "group.share.heartbeat.interval.ms": "5000"},
     "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"),
])
def test_values_out_of_bounds_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)
