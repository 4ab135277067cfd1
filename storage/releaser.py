"""File work that may free disk blocks, done on a background thread of the process.

Why: freeing blocks can wait on the disk. On a filesystem mounted with ``discard`` and
without a journal (the root ext4 of the benchmark VM, seventh round in
`git show 0858314:docs/BENCHMARKS.md`), ext4 discards freed blocks synchronously inside the call that frees them, and
the device answers a discard after the writes queued ahead of it. Measured there: the
ftruncate of a segment roll, which frees the blocks reserved past the data, held a
worker's event loop for up to ~0.75 s under a 1 KiB max-throughput load (the
thread sat in ``blkdev_issue_discard`` under ``ext4_truncate``), and unlinking a written
1 GiB segment took 658 ms on an idle machine. Unmapping a full 1 GiB segment costs
15-20 ms more. None of that needs the owner thread: a sealed segment's readers use
(fd, position, length) ranges below its data end, which the cut never touches.

Jobs run in submission order on one daemon thread, started on first use in each
process (workers are forked, and a thread does not survive a fork). ``drain`` waits
for every job submitted before it: a clean close drains, so a closed log is byte for
byte Kafka's. A job lost to a crash leaves a sealed file longer than its data (zeros);
recovery finds that tail and cuts it (``LogSegment.has_unaccounted_tail``).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any, Callable

log = logging.getLogger(__name__)

_Job = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class JobThread:
    """One FIFO worker thread per process, named ``name``. ``RELEASER`` below is the one for
    block-freeing file calls; storage/mmap_file.py keeps another (``RESERVER``) for
    fallocate ahead of the writer, so a reservation never waits behind a discard."""

    def __init__(self, name: str = "castle-block-releaser") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._pid = -1
        self._jobs: queue.Queue[_Job] = queue.Queue()

    def submit(self, job: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._started().put((job, args, kwargs))

    def drain(self, timeout_s: float = 60.0) -> bool:
        """Wait until every job submitted so far has run; False if ``timeout_s`` passed."""
        if self._pid != os.getpid():
            return True  # nothing was submitted in this process
        done = threading.Event()
        self._jobs.put((done.set, (), {}))
        return done.wait(timeout_s)

    def _started(self) -> queue.Queue[_Job]:
        pid = os.getpid()
        if self._pid != pid:
            with self._lock:
                if self._pid != pid:
                    # A fresh queue: a forked child must not inherit its parent's jobs.
                    self._jobs = queue.Queue()
                    threading.Thread(target=self._run, args=(self._jobs,), name=self.name,
                                     daemon=True).start()
                    self._pid = pid
        return self._jobs

    @staticmethod
    def _run(jobs: queue.Queue[_Job]) -> None:
        while True:
            job, args, kwargs = jobs.get()
            try:
                job(*args, **kwargs)
            except Exception:  # one failed release must not stop the ones after it
                log.exception("background file job %s failed", getattr(job, "__name__", job))


RELEASER = JobThread("castle-block-releaser")
