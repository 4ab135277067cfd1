"""Broker settings: each declared once (Kafka's name, type, default, doc).

Sources, later wins: the declared defaults, a config file (Kafka's ``.properties`` format,
or TOML when the name ends in ``.toml``), then ``--override key=value`` flags, exactly as
``kafka-server-start.sh server.properties --override k=v`` does. Unknown keys are an
error, never a silent no-op. Topic-level storage defaults (``log.segment.bytes``…) are
declared here too, from storage.config's table, so one list covers everything.
"""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from broker.listeners import ListenerSet, parse_endpoints, parse_protocol_map
from coordination.groups.consumer.assignors import DEFAULT_ASSIGNORS, parse_assignors
from storage.config import INT_MAX, LONG_MAX, TOPIC_KEYS, LogConfig, integer_in

Parser = Callable[[str], Any]


def _bool(value: str) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"expected true or false, not {value!r}")
    return text == "true"


def _str(value: str) -> str:
    return str(value).strip()


def _log_level(value: str) -> str:
    text = str(value).strip().upper()
    if text not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError(f"expected DEBUG, INFO, WARNING, ERROR or CRITICAL, not {value!r}")
    return text


def _assignors(value: str) -> str:
    names = parse_assignors(str(value))  # ValueError (UnsupportedAssignor) names what is known
    return ",".join(names)


def _choice(*allowed: str) -> Parser:
    def parse(value: str) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, not {value!r}")
        return text
    return parse


def _host_port_or_empty(value: str) -> str:
    text = str(value).strip()
    if text:
        host, colon, port = text.rpartition(":")
        if not colon or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port, not {value!r}")
    return text


def _endpoints(value: str) -> str:
    text = str(value).strip()
    if text:
        parse_endpoints(text)
    return text


def _protocol_map(value: str) -> str:
    parse_protocol_map(str(value))
    return str(value).strip()


def _ip_overrides(value: str) -> str:
    """``host:count,ip:count`` (Kafka's max.connections.per.ip.overrides, read as Csv.parseCsvMap
    does: the last colon ends the host, so an IPv6 address may stand whole)."""
    items = [item.strip() for item in str(value).split(",") if item.strip()]
    for item in items:
        host, colon, count = item.rpartition(":")
        host = host.strip()
        if not colon or not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"expected host:count, not {item!r}")
        if not all(char.isalnum() or char in "-%._:" for char in host):
            raise ValueError(f"invalid address {host!r}")
        if int(count) < 0:
            raise ValueError(f"a connection count cannot be negative: {item!r}")
    return ",".join(items)


ZERO_PER_IP = "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."


def _mechanisms(value: str) -> str:
    names = [name.strip().upper() for name in str(value).split(",") if name.strip()]
    unknown = [name for name in names if name not in SASL_MECHANISMS]
    if unknown:
        raise ValueError(f"unsupported SASL mechanism {', '.join(unknown)} (Castle has {', '.join(SASL_MECHANISMS)})")
    return ",".join(names)


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    parse: Parser
    default: Any
    doc: str

    @property
    def value_type(self) -> type:
        """What the setting's values are (bool, int, float or str): its default's type, which its
        parser returns too (a unit test holds them together), so the type is declared once."""
        return type(self.default)


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The class names operators set for Kafka's own authorizers; either turns on Castle's one.
AUTHORIZER_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")

# Kafka's PASSWORD settings of Castle's: DescribeConfigs answers them sensitive, without a value.
SENSITIVE_SETTINGS = frozenset({"delegation.token.secret.key", "delegation.token.master.key", "ssl.key.password",
                                "password.encoder.secret"})

# Settings a listener may override with the prefix listener.name.<listener>. (Kafka's).
SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.key.password", "ssl.truststore.type",
            "ssl.truststore.location", "ssl.client.auth", "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites",
            "ssl.endpoint.identification.algorithm")
LISTENER_KEYS = (*SSL_KEYS, "sasl.enabled.mechanisms", "max.connections", "max.connection.creation.rate")
JAAS_SUFFIX = ".sasl.jaas.config"


SETTINGS: list[Setting] = [
    Setting("node.id", integer_in(0, INT_MAX), 0, "This broker's id, as in meta.properties and Metadata answers."),
    Setting("listeners", _endpoints, "PLAINTEXT://127.0.0.1:9092", "Where clients connect: NAME://host:port, comma-separated."),
    Setting("listener.security.protocol.map", _protocol_map, "",
            "NAME:PROTOCOL pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); empty: the four standard names map to themselves."),
    Setting("advertised.listeners", _endpoints, "", "What Metadata tells clients, per listener name (defaults to listeners)."),
    Setting("inter.broker.listener.name", _str, "",
            "The listener brokers reach each other on; empty: PLAINTEXT if there is one, else the first listener."),
    # TLS (KIP-651's PEM files); each may be overridden per listener: listener.name.<name>.ssl.*
    Setting("ssl.keystore.type", _choice("pem"), "pem", "Only PEM: the certificate chain and PKCS#8 key in one file."),
    Setting("ssl.keystore.location", _str, "", "PEM file with this broker's certificate chain and private key."),
    Setting("ssl.key.password", _str, "", "Password of an encrypted private key (empty: not encrypted)."),
    Setting("ssl.truststore.type", _choice("pem"), "pem", "Only PEM."),
    Setting("ssl.truststore.location", _str, "", "PEM file of the CAs trusted for client (and broker) certificates."),
    Setting("ssl.client.auth", _choice("none", "requested", "required"), "none", "Whether clients present a certificate."),
    Setting("ssl.protocol", _str, "TLSv1.3", "TLS, TLSv1.2 or TLSv1.3 (the highest version offered)."),
    Setting("ssl.enabled.protocols", _str, "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    Setting("ssl.cipher.suites", _str, "", "IANA names of the TLS 1.2 suites allowed (empty: OpenSSL's defaults)."),
    Setting("ssl.endpoint.identification.algorithm", _str, "https",
            "https: a broker checks the host name in the certificate of the broker it connects to; empty: not."),
    Setting("password.encoder.secret", _str, "",
            "The secret that encodes dynamic password configs (per-listener ssl.key.password) where they are stored; "
            "the same on every broker. Empty: such configs cannot be set dynamically."),
    # SASL
    Setting("sasl.enabled.mechanisms", _mechanisms, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "Mechanisms offered on SASL listeners (Kafka's default GSSAPI is not available)."),
    Setting("sasl.mechanism.inter.broker.protocol", _mechanisms, "",
            "The mechanism brokers use with each other on a SASL listener; empty: the first enabled one."),
    Setting("sasl.server.max.receive.size", integer_in(1, INT_MAX), 512 * 1024,
            "Largest frame read before a connection authenticated; a larger one closes it."),
    Setting("connections.max.reauth.ms", integer_in(0), 0,
            "A SASL session lasts this long; then only re-authentication is served (0: forever)."),
    # Delegation tokens (KIP-48): on when a secret key is set (broker/security/delegation_tokens.py).
    Setting("delegation.token.secret.key", _str, "",
            "The key every broker signs delegation tokens with (the same on all); empty: tokens are disabled."),
    Setting("delegation.token.master.key", _str, "", "Deprecated name of delegation.token.secret.key."),
    Setting("delegation.token.max.lifetime.ms", integer_in(1), 7 * 24 * 3600 * 1000,
            "No token lives longer than this, however often it is renewed."),
    Setting("delegation.token.expiry.time.ms", integer_in(1), 24 * 3600 * 1000,
            "How long a token lasts when created or renewed without a period of its own."),
    Setting("delegation.token.expiry.check.interval.ms", integer_in(1), 3600 * 1000,
            "How often expired tokens are deleted from the store."),
    # Authorization (Kafka's ACLs); on when authorizer.class.name names Kafka's authorizer.
    Setting("authorizer.class.name", _choice("", *(name.lower() for name in AUTHORIZER_NAMES)), "",
            "Empty: no authorization. Kafka's StandardAuthorizer or AclAuthorizer name: Castle's authorizer (Kafka's rules)."),
    Setting("super.users", _str, "", "Principals allowed everything, ';'-separated (User:admin;User:broker)."),
    Setting("allow.everyone.if.no.acl.found", _bool, False, "A resource without any ACL is open to all (Kafka's default: not)."),
    Setting("log.dirs", _str, "./data", "Comma-separated data directories."),
    Setting("workers", integer_in(0, 1024), 0, "Worker processes; 0 means one per core."),
    Setting("num.partitions", integer_in(1, INT_MAX), 1, "Partitions of an auto-created topic."),
    Setting("default.replication.factor", integer_in(1, INT_MAX), 1,
            "Replicas of a partition when CreateTopics asks for -1, and of auto-created topics."),
    Setting("offsets.topic.replication.factor", integer_in(1, INT_MAX), 3,
            "Replicas of __consumer_offsets; with fewer live brokers at its creation it gets as many as there are."),
    Setting("replica.lag.time.max.ms", integer_in(1, INT_MAX), 30_000,
            "A follower that has not caught up with the leader's log end for this long leaves the ISR."),
    Setting("replica.fetch.wait.max.ms", integer_in(0, INT_MAX), 500, "How long a follower's Fetch may wait at the leader."),
    Setting("replica.fetch.max.bytes", integer_in(1, INT_MAX), 1024 * 1024, "Bytes a follower asks per partition."),
    Setting("replica.fetch.response.max.bytes", integer_in(1, INT_MAX), 10 * 1024 * 1024, "Bytes a follower asks per Fetch."),
    Setting("replica.fetch.backoff.ms", integer_in(0, INT_MAX), 1_000, "A follower's pause after a failed Fetch."),
    Setting("num.replica.fetchers", integer_in(1, INT_MAX), 1,
            "Fetch loops (each its own connection) per leader broker in each worker; partitions are split "
            "among them as Kafka splits them among its fetcher threads."),
    Setting("auto.leader.rebalance.enable", _bool, True,
            "The controller gives partitions back to their preferred (first) replica when a broker's share passes the threshold."),
    Setting("leader.imbalance.check.interval.seconds", integer_in(1, INT_MAX), 300, "How often the controller checks it."),
    Setting("leader.imbalance.per.broker.percentage", integer_in(0, 100), 10,
            "The share of a broker's preferred partitions led elsewhere that triggers a rebalance."),
    Setting("replica.high.watermark.checkpoint.interval.ms", integer_in(1, INT_MAX), 5_000,
            "How often high watermarks are written to replication-offset-checkpoint."),
    Setting("auto.create.topics.enable", _bool, True, "Create unknown topics asked for in Metadata."),
    Setting("delete.topic.enable", _bool, True, "Allow DeleteTopics."),
    Setting("socket.request.max.bytes", integer_in(1, INT_MAX), 100 * 1024 * 1024, "A bigger request frame closes the connection."),
    # Kafka's defaults are 100 KiB; ours are -1 because a fixed size turns off Linux's
    # buffer autotuning, and a Python worker gains most from few large reads (1 KiB
    # records: 2x the produce throughput, docs/BENCHMARKS.md).
    Setting("socket.send.buffer.bytes", integer_in(-1, INT_MAX), -1, "SO_SNDBUF of client sockets (-1: the OS default, autotuned)."),
    Setting("socket.receive.buffer.bytes", integer_in(-1, INT_MAX), -1, "SO_RCVBUF of client sockets (-1: the OS default, autotuned)."),
    Setting("socket.listen.backlog.size", integer_in(1, INT_MAX), 1024, "listen() backlog of each worker's socket."),
    Setting("worker.ring.bytes", integer_in(0, 1 << 30), 0,
            "Capacity of each shared-memory ring between two workers (one per ordered pair); 0: 8 MiB, less "
            "with many workers (64 MiB of inbound rings per worker at most)."),
    Setting("metrics.listener", _host_port_or_empty, "127.0.0.1:9308",
            "host:port of the Prometheus endpoint (/metrics), served by the coordinator process; empty: no metrics."),
    Setting("quota.window.num", integer_in(1, INT_MAX), 11, "Samples kept to measure a client quota's rate (Kafka's)."),
    Setting("quota.window.size.seconds", integer_in(1, INT_MAX), 1, "The time span of each client quota sample (Kafka's)."),
    # Replication throttles (KIP-73): Kafka's QuotaConfig names, types and docs; the rates are dynamic broker configs.
    Setting("leader.replication.throttled.rate", integer_in(0), LONG_MAX,
            "A long representing the upper bound (bytes/sec) on replication traffic for leaders enumerated in the "
            "property leader.replication.throttled.replicas (for each topic). This property can be only set "
            "dynamically. It is suggested that the limit be kept above 1MB/s for accurate behaviour."),
    Setting("follower.replication.throttled.rate", integer_in(0), LONG_MAX,
            "A long representing the upper bound (bytes/sec) on replication traffic for followers enumerated in the "
            "property follower.replication.throttled.replicas (for each topic). This property can be only set "
            "dynamically. It is suggested that the limit be kept above 1MB/s for accurate behaviour."),
    Setting("replica.alter.log.dirs.io.max.bytes.per.second", integer_in(0), LONG_MAX,
            "A long representing the upper bound (bytes/sec) on disk IO used for moving replica between log "
            "directories on the same broker. This property can be only set dynamically. It is suggested that the "
            "limit be kept above 1MB/s for accurate behaviour."),
    Setting("replication.quota.window.num", integer_in(1, INT_MAX), 11,
            "The number of samples to retain in memory for replication quotas"),
    Setting("replication.quota.window.size.seconds", integer_in(1, INT_MAX), 1,
            "The time span of each sample for replication quotas"),
    Setting("alter.log.dirs.replication.quota.window.num", integer_in(1, INT_MAX), 11,
            "The number of samples to retain in memory for alter log dirs replication quotas"),
    Setting("alter.log.dirs.replication.quota.window.size.seconds", integer_in(1, INT_MAX), 1,
            "The time span of each sample for alter log dirs replication quotas"),
    Setting("controller.quota.window.num", integer_in(1, INT_MAX), 11,
            "Samples of controller_mutation_rate's token bucket: its burst is this x the window size x the rate (Kafka's)."),
    Setting("controller.quota.window.size.seconds", integer_in(1, INT_MAX), 1,
            "The time span of each controller_mutation_rate sample (Kafka's)."),
    Setting("queued.max.requests", integer_in(1, INT_MAX), 500, "Unanswered requests per connection before reading pauses."),
    Setting("queued.max.request.bytes", integer_in(1, INT_MAX), 16 * 1024 * 1024,
            "Bytes of unanswered request frames per connection before reading pauses (Kafka's is per broker)."),
    # Kafka's connection limits (broker/network/connection_quotas.py); the per-ip ones hold
    # across every worker of the broker.
    Setting("max.connections", integer_in(0, INT_MAX), INT_MAX,
            "The maximum number of connections we allow in the broker at any time. This limit is applied in addition "
            "to any per-ip limits configured using max.connections.per.ip. Listener-level limits may also be configured "
            "by prefixing the config name with the listener prefix, for example, "
            "<code>listener.name.internal.max.connections</code>. Broker-wide limit should be configured based on broker "
            "capacity while listener limits should be configured based on application requirements. New connections "
            "are blocked if either the listener or broker limit is reached. Connections on the inter-broker listener are "
            "permitted even if broker-wide limit is reached. The least recently used connection on another listener "
            "will be closed in this case."),
    Setting("max.connections.per.ip", integer_in(0, INT_MAX), INT_MAX,
            "The maximum number of connections we allow from each ip address. This can be set to 0 if there are "
            "overrides configured using max.connections.per.ip.overrides property. New connections from the ip address "
            "are dropped if the limit is reached."),
    Setting("max.connections.per.ip.overrides", _ip_overrides, "",
            "A comma-separated list of per-ip or hostname overrides to the default maximum number of connections. "
            "An example value is \"hostName:100,127.0.0.1:200\""),
    Setting("max.connection.creation.rate", integer_in(0, INT_MAX), INT_MAX,
            "The maximum connection creation rate we allow in the broker at any time. Listener-level limits may also "
            "be configured by prefixing the config name with the listener prefix, for example, "
            "<code>listener.name.internal.max.connection.creation.rate</code>.Broker-wide connection rate limit should "
            "be configured based on broker capacity while listener limits should be configured based on application "
            "requirements. New connections will be throttled if either the listener or the broker limit is reached, "
            "with the exception of inter-broker listener. Connections on the inter-broker listener will be throttled "
            "only when the listener-level rate limit is reached."),
    Setting("connections.max.idle.ms", integer_in(-1), 600_000, "A connection with nothing in flight and no traffic this long is closed (-1: never)."),
    Setting("cluster.id", _str, "", "Cluster id; empty: taken from meta.properties or generated."),
    Setting("log.retention.check.interval.ms", integer_in(1), 300_000, "How often retention runs."),
    # Kafka's coarser forms of log.retention.ms: used only when it is not set (ms wins,
    # then minutes, then hours, as in Kafka). -1 means unset here.
    Setting("log.retention.minutes", integer_in(-1, INT_MAX), -1, "Retention in minutes, when log.retention.ms is not set."),
    Setting("log.retention.hours", integer_in(-1, INT_MAX), -1, "Retention in hours, when neither ms nor minutes is set."),
    Setting("log.flush.scheduler.interval.ms", integer_in(1), (1 << 63) - 1, "How often flush.ms deadlines are checked."),
    Setting("log.flush.offset.checkpoint.interval.ms", integer_in(0, INT_MAX), 60_000, "How often recovery points are checkpointed."),
    Setting("log.flush.start.offset.checkpoint.interval.ms", integer_in(0, INT_MAX), 60_000, "How often log start offsets are checkpointed."),
    Setting("log.cleaner.enable", _bool, True, "Run the compaction cleaner for compacted topics."),
    Setting("log.cleaner.backoff.ms", integer_in(0), 15_000, "Sleep between cleaner passes."),
    Setting("graceful.shutdown.timeout.ms", integer_in(0), 30_000, "SIGTERM: how long workers may finish in-flight work."),
    Setting("worker.heartbeat.timeout.ms", integer_in(1), 30_000, "A worker whose loop is silent this long is killed and replaced."),
    Setting("worker.restart.max", integer_in(1, INT_MAX), 5, "Worker deaths within worker.restart.window.ms that stop the broker."),
    Setting("worker.restart.window.ms", integer_in(1), 60_000, "The window of worker.restart.max."),
    Setting("producer.id.block.size", integer_in(1, INT_MAX), 1000, "Producer ids reserved on disk at a time."),
    Setting("log.level", _log_level, "INFO", "Logging level (DEBUG adds a line per request); reloaded on SIGHUP."),
    Setting("log.format", _choice("text", "json"), "text", "text: time level role[pid] logger: message; json: one object per line."),
    Setting("run.dir", _str, "", "Where stats files and metrics live; empty: a private dir in memory ($XDG_RUNTIME_DIR, /dev/shm), else under /tmp."),
    # Coordination and consumer groups (Kafka's names and defaults).
    Setting("zookeeper.connect", _str, "",
            "host:port[,host:port][/chroot] of ZooKeeper; empty: the local backend (one machine, election by file lock)."),
    Setting("zookeeper.session.timeout.ms", integer_in(1), 18_000, "ZooKeeper session timeout."),
    Setting("zookeeper.connection.timeout.ms", integer_in(1), 18_000, "How long to wait for ZooKeeper at start."),
    Setting("group.min.session.timeout.ms", integer_in(0, INT_MAX), 6_000, "Smallest session.timeout.ms a member may ask for."),
    Setting("group.max.session.timeout.ms", integer_in(0, INT_MAX), 1_800_000, "Largest session.timeout.ms a member may ask for."),
    Setting("group.initial.rebalance.delay.ms", integer_in(0, INT_MAX), 3_000,
            "How long the first rebalance of an empty group waits for more members."),
    Setting("group.max.size", integer_in(1, INT_MAX), INT_MAX, "Members a group may have."),
    # The consumer group protocol (KIP-848), Kafka's names and defaults.
    Setting("group.consumer.session.timeout.ms", integer_in(1, INT_MAX), 45_000,
            "A consumer group member that sends no heartbeat for this long is fenced."),
    Setting("group.consumer.heartbeat.interval.ms", integer_in(1, INT_MAX), 5_000,
            "How often consumer group members are told to heartbeat."),
    Setting("group.consumer.min.session.timeout.ms", integer_in(1, INT_MAX), 45_000,
            "Smallest consumer.session.timeout.ms a group config may set."),
    Setting("group.consumer.max.session.timeout.ms", integer_in(1, INT_MAX), 60_000,
            "Largest consumer.session.timeout.ms a group config may set."),
    Setting("group.consumer.min.heartbeat.interval.ms", integer_in(1, INT_MAX), 5_000,
            "Smallest consumer.heartbeat.interval.ms a group config may set."),
    Setting("group.consumer.max.heartbeat.interval.ms", integer_in(1, INT_MAX), 15_000,
            "Largest consumer.heartbeat.interval.ms a group config may set."),
    Setting("group.consumer.max.size", integer_in(1, INT_MAX), INT_MAX, "Members a consumer group may have."),
    Setting("group.consumer.migration.policy", _choice("disabled", "downgrade", "upgrade", "bidirectional"),
            "bidirectional", "Which online changes between classic and consumer groups are made (KIP-848)."),
    Setting("group.consumer.assignors", _assignors, DEFAULT_ASSIGNORS,
            "Server-side assignors (uniform, range, or Kafka's class names); the first is the default."),
    # Share groups (KIP-932): the share partitions' settings, Kafka's names, defaults and bounds.
    Setting("group.share.record.lock.duration.ms", integer_in(1000, 3_600_000), 30_000,
            "How long a share consumer holds the records it acquired before they are available again."),
    Setting("group.share.min.record.lock.duration.ms", integer_in(1000, 30_000), 15_000,
            "The smallest share.record.lock.duration.ms a group may set."),
    Setting("group.share.max.record.lock.duration.ms", integer_in(30_000, 3_600_000), 60_000,
            "The largest share.record.lock.duration.ms a group may set."),
    Setting("group.share.delivery.count.limit", integer_in(2, 10), 5,
            "Deliveries of a record to a share group after which it is archived instead of delivered again."),
    Setting("group.share.partition.max.record.locks", integer_in(100, 10_000), 2_000,
            "Records a share partition may have in flight (acquired or waiting between acquired ones)."),
    Setting("group.share.max.share.sessions", integer_in(1, INT_MAX), 2_000, "Share sessions a worker keeps open."),
    # Share groups (KIP-932), Kafka's names, defaults and bounds (checked together in _check_share_groups).
    Setting("group.share.session.timeout.ms", integer_in(1, INT_MAX), 45_000,
            "A share group member that sends no heartbeat for this long is fenced."),
    Setting("group.share.min.session.timeout.ms", integer_in(1, INT_MAX), 45_000,
            "Smallest group.share.session.timeout.ms allowed."),
    Setting("group.share.max.session.timeout.ms", integer_in(1, INT_MAX), 60_000,
            "Largest group.share.session.timeout.ms allowed."),
    Setting("group.share.heartbeat.interval.ms", integer_in(1, INT_MAX), 5_000,
            "How often share group members are told to heartbeat."),
    Setting("group.share.min.heartbeat.interval.ms", integer_in(1, INT_MAX), 5_000,
            "Smallest group.share.heartbeat.interval.ms allowed."),
    Setting("group.share.max.heartbeat.interval.ms", integer_in(1, INT_MAX), 15_000,
            "Largest group.share.heartbeat.interval.ms allowed."),
    Setting("group.share.max.size", integer_in(1, 1000), 200, "Members a share group may have."),
    Setting("offsets.topic.num.partitions", integer_in(1, INT_MAX), 50, "Partitions of __consumer_offsets (fixed once created)."),
    Setting("offsets.topic.segment.bytes", integer_in(14, INT_MAX), 100 * 1024 * 1024, "segment.bytes of __consumer_offsets."),
    Setting("offsets.retention.minutes", integer_in(1, INT_MAX), 7 * 24 * 60, "Offsets of an empty group are kept this long."),
    Setting("offsets.retention.check.interval.ms", integer_in(1), 600_000, "How often expired offsets are removed."),
    Setting("offset.metadata.max.bytes", integer_in(0, INT_MAX), 4096, "Largest metadata string of a committed offset."),
    # Transactions (Kafka's names and defaults).
    Setting("transaction.state.log.num.partitions", integer_in(1, INT_MAX), 50,
            "Partitions of __transaction_state (fixed once created)."),
    Setting("transaction.state.log.replication.factor", integer_in(1, INT_MAX), 3,
            "Replicas of __transaction_state; with fewer live brokers at its creation it gets as many as there are."),
    Setting("transaction.state.log.min.isr", integer_in(1, INT_MAX), 2,
            "min.insync.replicas of __transaction_state (at most its replication factor)."),
    Setting("transaction.state.log.segment.bytes", integer_in(14, INT_MAX), 100 * 1024 * 1024,
            "segment.bytes of __transaction_state."),
    Setting("transaction.max.timeout.ms", integer_in(1, INT_MAX), 900_000,
            "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above)."),
    Setting("transactional.id.expiration.ms", integer_in(1, INT_MAX), 604_800_000,
            "A transactional id with no transaction for this long is removed."),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", integer_in(1, INT_MAX), 10_000,
            "How often transactions past their timeout are aborted."),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", integer_in(1, INT_MAX), 3_600_000,
            "How often expired transactional ids are removed."),
    # The share coordinator (KIP-932; Kafka's ShareCoordinatorConfig names and defaults).
    Setting("share.coordinator.state.topic.num.partitions", integer_in(1, INT_MAX), 50,
            "Partitions of __share_group_state (fixed once created)."),
    Setting("share.coordinator.state.topic.replication.factor", integer_in(1, 32767), 3,
            "Replicas of __share_group_state; with fewer live brokers at its creation it gets as many as there are."),
    Setting("share.coordinator.state.topic.min.isr", integer_in(1, 32767), 2,
            "min.insync.replicas of __share_group_state (at most its replication factor)."),
    Setting("share.coordinator.state.topic.segment.bytes", integer_in(14, INT_MAX), 100 * 1024 * 1024,
            "segment.bytes of __share_group_state."),
    Setting("share.coordinator.snapshot.update.records.per.snapshot", integer_in(0, 500), 500,
            "ShareUpdate records a share-partition's state gets between two ShareSnapshot records."),
    Setting("transaction.version", integer_in(0, 2), 2,
            "The transaction.version feature level finalized until UpdateFeatures (kafka-features.sh) stores one for "
            "the cluster (Kafka's feature; supported 0-2): 2 lets "
            "Kafka 4.x clients use KIP-890's protocol (the broker adds partitions, every end bumps the epoch); 1 holds "
            "them to the first one. Every cluster member should have the same."),
    Setting("transaction.partition.verification.enable", _bool, True,
            "A transactional batch from a transaction.version 1 producer opens its transaction on a partition only once "
            "the transaction coordinator confirms the partition was added (KIP-890); false appends it unchecked, as "
            "brokers before Kafka 3.6 did, which lets a late write leave a hanging transaction. Version 2 producers "
            "are always checked: that is how their partitions are added."),
    Setting("producer.id.expiration.ms", integer_in(1, INT_MAX), 86_400_000,
            "A producer id with no write to a partition for this long is forgotten there (never one with an open "
            "transaction)."),
    Setting("producer.id.expiration.check.interval.ms", integer_in(1, INT_MAX), 600_000,
            "How often producer ids past producer.id.expiration.ms are forgotten."),
    Setting("coordinator.heartbeat.timeout.ms", integer_in(1), 30_000,
            "A coordinator process whose loop is silent this long is killed and replaced."),
    # Client telemetry (KIP-714), Kafka's name and default.
    Setting("telemetry.max.bytes", integer_in(1, INT_MAX), 1_048_576,
            "The most bytes of metrics a client may send in one PushTelemetry."),
    Setting("max.request.partition.size.limit", integer_in(1, INT_MAX), 2000,
            "The most partitions one DescribeTopicPartitions answer describes (the client's limit is capped to it)."),
]

# The storage defaults, under their broker-level names, typed by storage.config.
for _topic_key, _spec in TOPIC_KEYS.items():
    if _spec.broker_key:  # a few topic keys have no broker-level default in Kafka either
        SETTINGS.append(Setting(_spec.broker_key, _spec.parse, getattr(LogConfig(), _spec.field),
                                f"Default for the topic setting {_topic_key}."))

# The types the typed accessors (BrokerConfig.get_int…) read.
VALUE_TYPES = (bool, int, float, str)

BY_NAME: dict[str, Setting] = {}
for _setting in SETTINGS:
    if _setting.name in BY_NAME:
        raise RuntimeError(f"setting {_setting.name} declared twice")
    if _setting.value_type not in VALUE_TYPES:
        raise RuntimeError(f"setting {_setting.name}'s default is a {_setting.value_type.__name__}, not one of "
                           f"{', '.join(t.__name__ for t in VALUE_TYPES)}")
    BY_NAME[_setting.name] = _setting


class ConfigError(ValueError):
    pass


def declared(name: str, value_type: type | None = None) -> Setting:
    """The setting ``name``; KeyError when no setting has that name, TypeError when
    ``value_type`` is given and is not the setting's type."""
    setting = BY_NAME.get(name)
    if setting is None:
        raise KeyError(f"no setting is named {name!r}")
    if value_type is not None and setting.value_type is not value_type:
        raise TypeError(f"setting {name} is of type {setting.value_type.__name__}, not {value_type.__name__}")
    return setting


class BrokerConfig:
    """Resolved settings, read through the accessor of their type: ``config.get_int("num.partitions")``.
    Each checks the name is declared and has that type, so a misspelt name or a wrong type fails
    on its first read (and in tests/unit/broker/test_setting_reads.py, which finds every read in
    the tree), not as a KeyError in production. There is no ``config["name"]``: mypy flags one, and
    that test one where mypy cannot see the type (a handler's ``node: Any``)."""

    def __init__(self, values: Mapping[str, Any], source: tuple[str | None, dict[str, str]] = (None, {}),
                 explicit: frozenset[str] = frozenset(), per_listener: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._values = dict(values)
        # listener.name.<listener>.<key> settings: listener name (upper case) -> key -> value.
        self.per_listener = {name: dict(keys) for name, keys in (per_listener or {}).items()}
        # Where the values came from (config file, overrides), so SIGHUP can read them again.
        self.source = source
        # The settings the file or an override named; the others hold their defaults.
        self.explicit = explicit

    def get_int(self, name: str) -> int:
        declared(name, int)
        return self._values[name]

    def get_float(self, name: str) -> float:
        declared(name, float)
        return self._values[name]

    def get_str(self, name: str) -> str:
        declared(name, str)
        return self._values[name]

    def get_bool(self, name: str) -> bool:
        declared(name, bool)
        return self._values[name]

    def value(self, name: str) -> Any:
        """Any setting's value, for code that handles settings by name whatever their type
        (SIGHUP reload, DescribeConfigs)."""
        declared(name)
        return self._values[name]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def update(self, values: Mapping[str, Any]) -> None:
        """Take new values for some settings (a SIGHUP reload of the dynamic ones)."""
        unknown = set(values) - set(self._values)
        if unknown:
            raise ConfigError(f"unknown settings {sorted(unknown)}")
        self._values.update(values)

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dirs(self) -> list[str]:
        return [os.path.abspath(d.strip()) for d in self.get_str("log.dirs").split(",") if d.strip()]

    @functools.cached_property
    def listeners(self) -> ListenerSet:
        return ListenerSet.from_settings(self.get_str("listeners"), self.get_str("listener.security.protocol.map"),
                                         self.get_str("advertised.listeners"), self.get_str("inter.broker.listener.name"))

    def for_listener(self, listener: str, key: str) -> Any:
        """``listener.name.<listener>.<key>`` when set, else the broker-wide ``key``."""
        value = self.per_listener.get(listener.upper(), {}).get(key)
        return value if value is not None else self._values.get(key, "")

    def tls_settings(self, listener: str) -> dict[str, str]:
        """The ssl.* settings of ``listener`` (its listener.name.<name>.ssl.* overrides first)."""
        return {key: str(self.for_listener(listener, key)) for key in SSL_KEYS}

    def jaas_config(self, listener: str, mechanism: str) -> str:
        """``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (Kafka's only broker form)."""
        return self.per_listener.get(listener.upper(), {}).get(mechanism.lower() + JAAS_SUFFIX, "")

    @property
    def workers(self) -> int:
        count = self.get_int("workers")
        return count if count > 0 else (os.cpu_count() or 1)

    def storage_settings(self) -> dict[str, Any]:
        """The broker-level keys storage.config and storage.manager understand."""
        keys = {spec.broker_key for spec in TOPIC_KEYS.values() if spec.broker_key}
        out = {k: v for k, v in self._values.items() if k in keys}
        for name in ("node.id", "log.retention.check.interval.ms", "log.flush.scheduler.interval.ms",
                     "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
                     "log.cleaner.backoff.ms", "replica.high.watermark.checkpoint.interval.ms",
                     "producer.id.expiration.ms", "producer.id.expiration.check.interval.ms"):
            out[name] = self._values[name]
        out["log.dirs"] = self.log_dirs
        out["log.cleaner.enable"] = "true" if self.get_bool("log.cleaner.enable") else "false"
        return out


def read_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset Kafka's server.properties uses: key=value or key: value,
    # and ! comments, trailing-backslash continuation."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for sep_index, char in enumerate(line):
            if char in "=:":
                out[line[:sep_index].strip()] = line[sep_index + 1:].strip()
                break
        else:
            out[line] = ""
    return out


def read_config_file(path: str) -> dict[str, str]:
    with open(path, "rb") as handle:
        data = handle.read()
    if path.endswith(".toml"):
        return {k: _toml_value(v) for k, v in _flatten(tomllib.loads(data.decode())).items()}
    return read_properties(data.decode())


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override needs key=value, not {item!r}")
        out[key.strip()] = value.strip()
    return out


def load_config(path: str | None = None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    raw: dict[str, str] = {}
    if path:
        raw.update(read_config_file(path))
    raw.update(overrides or {})
    values = {s.name: s.default for s in SETTINGS}
    per_listener: dict[str, dict[str, str]] = {}
    for key, text in raw.items():
        if listener_prefixed(key) is not None:
            listener, key_in_listener = _listener_key(key)
            if key_in_listener in BY_NAME:
                try:
                    BY_NAME[key_in_listener].parse(text)
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"bad value for {key}: {exc}") from None
            per_listener.setdefault(listener, {})[key_in_listener] = str(text).strip()
            continue
        setting = BY_NAME.get(key)
        if setting is None:
            raise ConfigError(f"unknown setting {key!r}")
        try:
            values[key] = setting.parse(text)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad value for {key}: {exc}") from None
    if "log.retention.ms" not in raw:
        for key, unit_ms in (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)):
            if values[key] >= 0:
                values["log.retention.ms"] = values[key] * unit_ms
                break
    config = BrokerConfig(values, (path, dict(overrides or {})), frozenset(raw), per_listener)
    try:
        listeners = config.listeners
    except ValueError as exc:
        raise ConfigError(f"bad listeners: {exc}") from None
    unknown_listeners = set(per_listener) - {listener.name for listener in listeners.bound}
    if unknown_listeners:
        raise ConfigError(f"settings for listeners that do not exist: {', '.join(sorted(unknown_listeners))}")
    _check_share_groups(config)
    if config.get_int("max.connections.per.ip") == 0 and not config.get_str("max.connections.per.ip.overrides"):
        raise ConfigError(ZERO_PER_IP)
    return config


def _check_share_groups(config: BrokerConfig) -> None:
    """Kafka's GroupCoordinatorConfig checks of the share group settings against each other."""
    def require(ok: bool, message: str) -> None:
        if not ok:
            raise ConfigError(message)

    session, heartbeat = config.get_int("group.share.session.timeout.ms"), config.get_int("group.share.heartbeat.interval.ms")
    min_session, max_session = (config.get_int("group.share.min.session.timeout.ms"),
                                config.get_int("group.share.max.session.timeout.ms"))
    min_heartbeat, max_heartbeat = (config.get_int("group.share.min.heartbeat.interval.ms"),
                                    config.get_int("group.share.max.heartbeat.interval.ms"))
    require(max_heartbeat >= min_heartbeat,
            "group.share.max.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms")
    require(heartbeat >= min_heartbeat,
            "group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms")
    require(heartbeat <= max_heartbeat,
            "group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms")
    require(max_session >= min_session,
            "group.share.max.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms")
    require(session >= min_session,
            "group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms")
    require(session <= max_session,
            "group.share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms")
    require(heartbeat < session,
            "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")


LISTENER_PREFIX = "listener.name."


def listener_prefixed(name: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<key>`` -> (listener as written, possibly empty, key); None
    for a name without the prefix."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, key = name[len(LISTENER_PREFIX):].partition(".")
    return listener, key


def _listener_key(key: str) -> tuple[str, str]:
    """``listener.name.<listener>.<key>`` -> (LISTENER, key), for the keys a listener may override."""
    listener, inner = listener_prefixed(key) or ("", "")
    mechanism = inner[:-len(JAAS_SUFFIX)].upper() if inner.endswith(JAAS_SUFFIX) else ""
    if not listener or (inner not in LISTENER_KEYS and mechanism not in SASL_MECHANISMS):
        raise ConfigError(f"unknown setting {key!r} (a listener may set {', '.join(LISTENER_KEYS)} "
                          f"and <mechanism>{JAAS_SUFFIX})")
    return listener.upper(), inner
