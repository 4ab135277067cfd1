"""Apache Kafka's own command-line tools (kafka-topics.sh, kafka-configs.sh, ...), run as Java.

The ``kafka-*.sh`` scripts are thin wrappers around a main class; this module fetches the
jars those classes need ONCE with Maven (loadtest/maven_jars.py) into ``~/.cache/castle-kafka-cli/<version>/lib``
(outside the repository) and runs a main class with ``java -cp '<lib>/*'``.

    from tests.kafka_cli import TOPIC_COMMAND, run_tool
    done = run_tool(TOPIC_COMMAND, ["--bootstrap-server", "127.0.0.1:9092", "--list"])

The version is ``CASTLE_KAFKA_CLI_VERSION`` (default 4.0.0); the main classes below are the
ones of the 4.0 line (``kafka-configs.sh`` still runs the Scala ``kafka.admin.ConfigCommand``).
A tool may be run from another version (``run_tool(..., version=...)``, its own cache):
kafka-transactions.sh runs from ``TRANSACTIONS_VERSION`` (4.4.0), kafka-share-groups.sh and the
kafka-configs.sh that sets share groups' configs from ``SHARE_VERSION`` (4.4.0).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from loadtest import maven_jars

KAFKA_VERSION = os.environ.get("CASTLE_KAFKA_CLI_VERSION", "4.0.0")
SLF4J_VERSION = "1.7.36"  # the slf4j-api the 4.0 tools depend on; its nop binding silences the "no binder" warning

CONFIG_COMMAND = "kafka.admin.ConfigCommand"  # kafka-configs.sh
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"  # kafka-topics.sh
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh
LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"  # kafka-leader-election.sh
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"  # kafka-transactions.sh
# kafka-transactions.sh is run from the 4.4 line: its list sends ListTransactions v2 (KIP-1152's
# --transactional-id-pattern), which 4.0 lacks.
TRANSACTIONS_VERSION = os.environ.get("CASTLE_KAFKA_TRANSACTIONS_CLI_VERSION", "4.4.0")
# kafka-configs.sh of the 4.4 line (a Java main class by then), for GROUP configs (KIP-848's
# --entity-type groups with every key of 4.4's GroupConfig, KIP-932's share.* among them).
GROUP_CONFIGS_VERSION = os.environ.get("CASTLE_KAFKA_GROUP_CONFIGS_CLI_VERSION", "4.4.0")
GROUP_CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
TOOLS_CONFIG_COMMAND = GROUP_CONFIG_COMMAND
# Share groups (KIP-932) are tooled from the 4.4 line: kafka-share-groups.sh.
SHARE_GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
SHARE_VERSION = os.environ.get("CASTLE_KAFKA_SHARE_CLI_VERSION", "4.4.0")
# kafka-client-metrics.sh (KIP-714's client-metrics subscriptions), from the 4.4 line.
CLIENT_METRICS_COMMAND = "org.apache.kafka.tools.ClientMetricsCommand"
CLIENT_METRICS_VERSION = os.environ.get("CASTLE_KAFKA_CLIENT_METRICS_CLI_VERSION", "4.4.0")

# Short-lived JVMs: start fast rather than run fast.
_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss1m", "-Djava.awt.headless=true"]


def cache_dir(version: str = KAFKA_VERSION) -> Path:
    return Path.home() / ".cache" / "castle-kafka-cli" / version


def missing_tools(version: str = KAFKA_VERSION) -> list[str]:
    """The programs this module needs that are not on PATH (``java`` always, ``mvn`` until fetched)."""
    return maven_jars.missing_tools(cache_dir(version))


def ensure_jars(version: str = KAFKA_VERSION) -> Path:
    """The directory holding every jar the tools of ``version`` need; fetched on the first call only."""
    coordinates = [f"org.apache.kafka:kafka_2.13:{version}", f"org.apache.kafka:kafka-tools:{version}",
                   f"org.slf4j:slf4j-nop:{SLF4J_VERSION}"]
    return maven_jars.fetch_jars(cache_dir(version), coordinates, expect=f"kafka-tools-{version}.jar")


def run_tool(main_class: str, args: list[str], timeout: float = 120,
             version: str = KAFKA_VERSION) -> subprocess.CompletedProcess[str]:
    """Run ``java -cp '<lib>/*' MAIN_CLASS ARGS`` with the tools of ``version``, bounded by
    ``timeout`` seconds (the fetch is not counted).

    Never raises on a non-zero exit: the caller checks ``returncode``, ``stdout`` and ``stderr``.
    """
    lib = ensure_jars(version)
    command = ["java", *_JVM_FLAGS, "-cp", f"{lib}/*", main_class, *args]
    env = dict(os.environ)
    env.pop("JAVA_TOOL_OPTIONS", None)  # it makes the JVM print "Picked up ..." on stderr
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)


def kafka_configs(bootstrap: str, *args: str, version: str = GROUP_CONFIGS_VERSION) -> subprocess.CompletedProcess[str]:
    """``kafka-configs.sh --bootstrap-server BOOTSTRAP ARGS``, by default with the tools of a
    version that knows every entity type (groups, client-metrics, ips ...)."""
    return run_tool(TOOLS_CONFIG_COMMAND, ["--bootstrap-server", bootstrap, *args], version=version)


def kafka_configs_ok(bootstrap: str, *args: str) -> str:
    """What kafka-configs.sh printed, once it exited 0."""
    done = kafka_configs(bootstrap, *args)
    assert done.returncode == 0, f"kafka-configs {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout
