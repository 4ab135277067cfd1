"""Broker settings (broker/config.py): a .properties or TOML file with Kafka's names, then
--override flags; each value parsed by its declared type and range; an unknown key or a
bad value stops `castle serve` with a clear message before anything starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.config import ConfigError, load_config, parse_overrides


def test_properties_file_as_kafka_writes_them(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# a comment\n! another\nnode.id=3\nlisteners = PLAINTEXT://127.0.0.1:19999\n"
                    "log.dirs: /tmp/a,\\\n  /tmp/b\nlog.retention.ms=1000\nauto.create.topics.enable=false\n")
    config = load_config(str(path))
    assert config.node_id == 3
    assert [(lst.name, lst.host, lst.port) for lst in config.listeners.bound] == [("PLAINTEXT", "127.0.0.1", 19999)]
    assert config.log_dirs == ["/tmp/a", "/tmp/b"]
    assert config.get_int("log.retention.ms") == 1000
    assert config.get_bool("auto.create.topics.enable") is False


def test_toml_file_and_overrides_win(tmp_path):
    path = tmp_path / "castle.toml"
    path.write_text('workers = 2\n[log]\ndirs = ["/tmp/x"]\n"segment.bytes" = 65536\n')
    config = load_config(str(path), parse_overrides(["workers=3", "log.segment.bytes=1048576"]))
    assert config.workers == 3
    assert config.log_dirs == ["/tmp/x"]
    assert config.get_int("log.segment.bytes") == 1048576


@pytest.mark.parametrize("overrides,message", [
    ({"no.such.setting": "1"}, "unknown setting 'no.such.setting'"),
    ({"log.segment.bytes": "0"}, "bad value for log.segment.bytes: Value must be at least 14"),
    ({"log.flush.interval.messages": "0"}, "bad value for log.flush.interval.messages"),
    ({"log.cleaner.min.cleanable.ratio": "1.5"}, "between 0 and 1"),
    ({"workers": "-1"}, "bad value for workers"),
    ({"queued.max.requests": "0"}, "bad value for queued.max.requests"),
    ({"default.replication.factor": "0"}, "bad value for default.replication.factor"),
    ({"num.partitions": "0"}, "bad value for num.partitions"),
    ({"auto.create.topics.enable": "yes"}, "expected true or false"),
    ({"listeners": "FOO://127.0.0.1:9093"}, "listener FOO is not in listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9093", "listener.name.other.ssl.client.auth": "required"}, "listeners that do not exist: OTHER"),
    ({"listener.name.plaintext.ssl.nothing": "1"}, "unknown setting 'listener.name.plaintext.ssl.nothing'"),
])
def test_bad_settings_are_refused_by_name(overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        load_config(None, overrides)


def test_override_needs_key_and_value():
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["log.segment.bytes"])


def test_castle_serve_stops_on_a_bad_value_before_starting(tmp_path):
    result = subprocess.run([sys.executable, "-m", "broker", "serve", "--override", f"log.dirs={tmp_path}/data",
                             "--override", "log.segment.bytes=0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "bad value for log.segment.bytes" in result.stderr
    assert not (tmp_path / "data").exists()


def test_retention_in_hours_or_minutes_when_ms_is_not_set(tmp_path):
    assert load_config(None, {"log.retention.hours": "2"}).get_int("log.retention.ms") == 2 * 3_600_000
    assert load_config(None, {"log.retention.hours": "2", "log.retention.minutes": "3"}).get_int("log.retention.ms") == 180_000
    both = load_config(None, {"log.retention.ms": "5", "log.retention.minutes": "3"})
    assert both.get_int("log.retention.ms") == 5  # ms wins, as in Kafka
    default = load_config(None, {})
    assert default.get_int("log.retention.ms") == 7 * 24 * 3_600_000


@pytest.mark.parametrize("key, value", [("log.level", "LOUD"), ("log.format", "xml"), ("metrics.listener", "9308"),
                                        ("metrics.listener", "127.0.0.1:70000")])
def test_logging_and_metrics_settings_refuse_bad_values(key, value):
    with pytest.raises(ConfigError, match=f"bad value for {key}"):
        load_config(None, {key: value})


def test_the_tls_and_scram_example_config_loads_and_its_security_builds(tmp_path):
    """deploy/castle-secure.properties, with the test's own certificates in place of
    /etc/castle/tls: its TLS contexts build and brokers would authenticate with SCRAM-SHA-512."""
    from broker.security.broker_security import check_tls_files
    from broker.security.inter_broker import inter_broker_security
    from tests.certs import make_pki

    pki = make_pki(str(tmp_path / "pki"))
    config = load_config("deploy/castle-secure.properties", {"ssl.keystore.location": pki.server_keystore,
                                                             "ssl.truststore.location": pki.ca})
    assert [(lst.name, lst.protocol) for lst in config.listeners.bound] == [("SASL_SSL", "SASL_SSL"), ("INTERNAL", "SASL_SSL")]
    assert config.for_listener("INTERNAL", "ssl.client.auth") == "required"
    assert config.for_listener("SASL_SSL", "ssl.client.auth") == "none"
    check_tls_files(config)
    security = inter_broker_security(config)
    assert security is not None and security.ssl_context is not None
    assert (security.mechanism, security.username, security.password) == ("SCRAM-SHA-512", "broker", "change-me")
    with pytest.raises(ValueError, match="sasl.jaas.config is needed"):
        inter_broker_security(load_config("deploy/castle-secure.properties", {
            "ssl.keystore.location": pki.server_keystore, "ssl.truststore.location": pki.ca,
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}))


def test_every_commented_setting_of_the_secure_example_loads_once_uncommented(tmp_path):
    import re

    from tests.certs import make_pki

    pki = make_pki(str(tmp_path / "pki"), clients={})
    with open("deploy/castle-secure.properties", encoding="utf-8") as handle:
        commented = re.findall(r"(?m)^#([a-z][a-z0-9.]*)=(.*)$", handle.read())
    assert {"authorizer.class.name", "super.users", "ssl.key.password"} <= {key for key, _value in commented}
    for key, value in commented:
        config = load_config("deploy/castle-secure.properties", {"ssl.keystore.location": pki.server_keystore,
                                                                 "ssl.truststore.location": pki.ca, key: value})
        assert str(config.value(key)).lower() == value.strip().lower(), key


def test_producer_id_expiration_settings_reach_the_log_manager() -> None:
    from storage.manager import ManagerConfig

    config = load_config(None, {"producer.id.expiration.ms": "5000", "producer.id.expiration.check.interval.ms": "250"})
    manager_config = ManagerConfig.from_broker_config(config.storage_settings())
    assert (manager_config.producer_id_expiration_ms, manager_config.producer_id_expiration_check_interval_ms) == (
        5000, 250)
    defaults = ManagerConfig.from_broker_config(load_config(None, {}).storage_settings())
    assert (defaults.producer_id_expiration_ms, defaults.producer_id_expiration_check_interval_ms) == (
        86_400_000, 600_000)
