"""A stop signal that reaches a child before its event loop handles signals is remembered.

Between the fork and ``loop.add_signal_handler`` a worker opens (and maybe recovers) its
logs and the coordinator builds its state; SIGTERM's default action there killed the
process, and the supervisor then called the stop unclean. The child remembers it instead
and stops as soon as its loop runs.
"""

from __future__ import annotations

import signal
from types import FrameType

requested = False


def _remember(_signum: int, _frame: FrameType | None) -> None:
    global requested
    requested = True


def remember_until_handled() -> None:
    """In a child right after the fork: SIGTERM and SIGINT only set ``requested``."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _remember)
