"""The broker's CPU and memory, read from /proc of all its processes.

CPU: utime+stime+cutime+cstime of every process of the tree (loadtest.common), so a
worker reaped during the run stays counted through its parent.

Memory: what the broker itself holds, not the page cache. A Castle worker maps its log
segments, and the pages of those maps it touched show up in its RSS (RssFile, and in
Pss), but they are page cache that the kernel shares and reclaims, not the broker's heap.
So the figure that answers "how much memory does the broker use" is the anonymous memory:
RssAnon from /proc/<pid>/status, summed over the processes. Pss_Anon from smaps_rollup
(each page divided by the number of processes sharing it, so pages a forked worker still
shares with the supervisor are not counted twice) is recorded beside it, and Pss (file
pages included) too, for the reader who wants the whole picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from loadtest.common import CLOCK_TICKS, proc_cpu_ticks_split, process_tree

KIB = 1024


def _status_kib(pid: int, names: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status", "rb") as handle:
        for line in handle:
            key, _, rest = line.partition(b":")
            name = key.decode()
            if name in names:
                found[name] = int(rest.split()[0])
    return found


def _smaps_rollup_kib(pid: int) -> dict[str, int]:
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                key, _, rest = line.partition(b":")
                if key in (b"Pss", b"Pss_Anon"):
                    found[key.decode()] = int(rest.split()[0])
    except (OSError, ValueError):  # no smaps_rollup (old kernel) or not permitted
        pass
    return found


@dataclass
class Sample:
    cpu_s: float  # cumulative CPU seconds of the tree
    rss_anon_mib: float
    pss_anon_mib: float | None
    pss_mib: float | None
    processes: int
    kernel_cpu_s: float = 0.0  # the part of cpu_s spent in the kernel (stime + cstime)


class BrokerProcesses:
    """A broker's processes: a root PID and its descendants (Castle's supervisor, its
    workers and coordinator), or a fixed list of PIDs (the mock is one process)."""

    def __init__(self, root: int | None = None, pids: Sequence[int] = ()) -> None:
        if root is None and not pids:
            raise ValueError("give the broker's root PID or its PIDs")
        self.root = root
        self.pids = list(pids)

    def current(self) -> list[int]:
        return process_tree(self.root) if self.root is not None else list(self.pids)

    def sample(self) -> Sample:
        ticks = kernel_ticks = anon = pss_anon = pss = processes = 0
        have_pss = True
        for pid in self.current():
            try:
                user, kernel = proc_cpu_ticks_split(pid)
                ticks += user + kernel
                kernel_ticks += kernel
                anon += _status_kib(pid, ("RssAnon",)).get("RssAnon", 0)
                rollup = _smaps_rollup_kib(pid)
            except (OSError, ValueError):
                continue  # exited between the listing and the read
            processes += 1
            if "Pss_Anon" in rollup and "Pss" in rollup:
                pss_anon += rollup["Pss_Anon"]
                pss += rollup["Pss"]
            else:
                have_pss = False
        return Sample(cpu_s=ticks / CLOCK_TICKS, rss_anon_mib=anon / KIB,
                      pss_anon_mib=pss_anon / KIB if have_pss else None,
                      pss_mib=pss / KIB if have_pss else None, processes=processes,
                      kernel_cpu_s=kernel_ticks / CLOCK_TICKS)
