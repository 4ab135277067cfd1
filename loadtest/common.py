"""Helpers shared by the load tools (the runner, the broker launchers, locust).

* Broker CPU from /proc: the broker runs as one or more processes that we did not start,
  so the only honest measure of its cost is the kernel's own account of CPU time
  (utime + stime in /proc/<pid>/stat), read before and after a run.
* key=value settings from the command line; progress on stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable

# Kafka's perf tools divide bytes by 1024*1024 and call it "MB"; we follow them so the
# figures can be put next to theirs, but print "MiB" to say what it is.
MIB = 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- CPU


def proc_cpu_ticks(pid: int) -> int:
    """CPU ticks of a process (all its threads): utime + stime + cutime + cstime.

    cutime/cstime hold the CPU of children the process has already waited for; a
    supervisor that restarts or reaps workers would otherwise lose their CPU from the
    count once they exit. Children still alive are counted on their own, and their
    time is not yet in the parent's cutime, so nothing is counted twice.
    """
    user, kernel = proc_cpu_ticks_split(pid)
    return user + kernel


def proc_cpu_ticks_split(pid: int) -> tuple[int, int]:
    """``proc_cpu_ticks`` as (user, kernel): utime + cutime, stime + cstime. The kernel's
    share is what no broker code can cut (page-cache pages, TCP, sendfile)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    # The command name (field 2) is in parentheses and may itself hold spaces or ')';
    # everything after the LAST ')' is space-separated, starting with field 3 (state).
    fields = raw[raw.rindex(b")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])  # fields 14..17
    return utime + cutime, stime + cstime


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:  # exited between listdir and open
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[1])  # field 4: ppid


def process_tree(root: int) -> list[int]:
    """root and all its descendants, found by walking the ppid links of /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            ppid = _parent_of(int(name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


# ---------------------------------------------------------------------- settings and output


def key_values(pairs: Iterable[str]) -> dict[str, str]:
    """Settings given as key=value strings (librdkafka's, a broker's); ValueError names a bad one."""
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"setting {pair!r} is not key=value")
        config[key.strip()] = value.strip()
    return config


def parse_key_values(pairs: Iterable[str], option: str) -> dict[str, str]:
    """A repeatable KEY=VALUE command-line option; a bad one stops the tool, naming it."""
    try:
        return key_values(pairs)
    except ValueError as exc:
        raise SystemExit(f"{option}: {exc}") from None


def file_tail(path: str, lines: int) -> str:
    """The last lines of a log file ('' if it cannot be read): a child's stderr in an error."""
    try:
        with open(path, "rb") as handle:
            return "\n".join(handle.read().decode(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def info(message: str) -> None:
    """Progress goes to stderr so stdout carries only the result (text or JSON)."""
    print(message, file=sys.stderr, flush=True)
