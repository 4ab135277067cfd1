"""Share groups as an operator sees them: Kafka 4.4's kafka-share-groups.sh and kafka-configs.sh
(tests/kafka_cli.py), their tables read back.

    set_group_configs(bootstrap, "g", {"share.auto.offset.reset": "earliest"})
    members(bootstrap, "g")   # {"client-1": {"t:0", "t:1"}, ...}: --describe --members
    offsets(bootstrap, "g")   # {"t:0": (start offset, lag), ...}: --describe --offsets

The tables are Kafka's: a header line, then one whitespace-separated row per item; a value the
tool does not know is printed as ``-`` (None here).
"""

from __future__ import annotations

import subprocess

from tests.kafka_cli import SHARE_GROUPS_COMMAND, SHARE_VERSION, TOOLS_CONFIG_COMMAND, run_tool

TOOL_TIMEOUT_S = 120.0


def share_groups(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """kafka-share-groups.sh ARGS; never raises on a non-zero exit (the caller reads returncode)."""
    return run_tool(SHARE_GROUPS_COMMAND, ["--bootstrap-server", bootstrap, *args], timeout=TOOL_TIMEOUT_S,
                    version=SHARE_VERSION)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """kafka-configs.sh --entity-type groups --alter --add-config (IncrementalAlterConfigs of
    the GROUP resource); the group need not exist yet."""
    done = run_tool(TOOLS_CONFIG_COMMAND, ["--bootstrap-server", bootstrap, "--entity-type", "groups",
                                           "--entity-name", group, "--alter", "--add-config",
                                           ",".join(f"{k}={v}" for k, v in configs.items())],
                    timeout=TOOL_TIMEOUT_S, version=SHARE_VERSION)
    assert done.returncode == 0 and f"Completed updating config for group {group}." in done.stdout, \
        f"kafka-configs.sh exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"


def group_configs(bootstrap: str, group: str) -> dict[str, str]:
    """The group's dynamic configs as kafka-configs.sh --describe prints them."""
    done = run_tool(TOOLS_CONFIG_COMMAND, ["--bootstrap-server", bootstrap, "--entity-type", "groups",
                                           "--entity-name", group, "--describe"],
                    timeout=TOOL_TIMEOUT_S, version=SHARE_VERSION)
    assert done.returncode == 0, f"kafka-configs.sh exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    found = {}
    for line in done.stdout.splitlines():
        words = line.split()
        if words and "=" in words[0] and line.startswith("  "):
            name, _, value = words[0].partition("=")
            found[name] = value
    return found


def rows(stdout: str, header_first: str) -> list[list[str]]:
    """The rows of the table whose header's first word is ``header_first`` (header left out)."""
    table: list[list[str]] = []
    inside = False
    for line in stdout.splitlines():
        words = line.split()
        if not words:
            inside = False if table else inside
            continue
        if words[0] == header_first:
            inside = True
            continue
        if inside:
            table.append(words)
    return table


def _known(word: str) -> int | None:
    return None if word == "-" else int(word)


def members(bootstrap: str, group: str) -> dict[str, set[str]]:
    """--describe --members: each member's client id and the ``topic:partition`` it is assigned."""
    done = share_groups(bootstrap, "--describe", "--group", group, "--members")
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    found: dict[str, set[str]] = {}
    # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT (empty when none)
    for words in rows(done.stdout, "GROUP"):
        client_id = words[3]
        held: set[str] = set()
        for entry in words[5:6]:
            for topic_part in entry.split(";"):
                topic, _, partitions = topic_part.rpartition(":")
                held |= {f"{topic}:{p}" for p in partitions.split(",") if p}
        found[client_id] = held
    return found


def state(bootstrap: str, group: str) -> tuple[str, int]:
    """--describe --state: the group's STATE and #MEMBERS."""
    done = share_groups(bootstrap, "--describe", "--group", group, "--state")
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    (row,) = rows(done.stdout, "GROUP")
    # GROUP COORDINATOR (ID) STATE #MEMBERS: the coordinator is two words, "host:port  (id)"
    return row[-2], int(row[-1])


def offsets(bootstrap: str, group: str) -> dict[str, tuple[int | None, int | None]]:
    """--describe --offsets: per ``topic:partition`` the START-OFFSET and LAG (None: ``-``)."""
    done = share_groups(bootstrap, "--describe", "--group", group, "--offsets")
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    # GROUP TOPIC PARTITION START-OFFSET LAG
    return {f"{w[1]}:{w[2]}": (_known(w[3]), _known(w[4])) for w in rows(done.stdout, "GROUP")}


def listed(bootstrap: str) -> dict[str, str]:
    """--list --state: every share group and its state."""
    done = share_groups(bootstrap, "--list", "--state")
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    return {w[0]: w[1] for w in rows(done.stdout, "GROUP")}
