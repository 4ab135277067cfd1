"""Keep the garbage collector's full collections off what lives as long as the process.

CPython's full (generation 2) collection walks every object it tracks. A worker tracks
~90,000 once it has started (the imported modules, the config, its logs), and under a
replicated load the first full collection of each worker took 58-214 ms (docs/BENCHMARKS.md,
"Garbage collection and heartbeats"): an event loop stalled for that long, which every request on the
worker waited out. In a forked child the walk also writes the header of every object
inherited from the supervisor, copying each page the two shared.

``gc.freeze`` moves the objects tracked so far into the permanent generation, which
collections skip (CPython's documentation advises it for pre-fork servers). Frozen objects
are still freed by reference counting; only a cycle among them stays until the process
exits. So each process freezes once, when it has built what it keeps for its life: the
supervisor before it forks (the children inherit the frozen set), a worker and the
coordinator process once they are ready to serve.
"""

from __future__ import annotations

import gc

# How many objects this process froze, for its stats. Kept here because gc.get_freeze_count()
# walks the whole permanent generation: asked every 0.5 s for a worker's stats, that walk
# over cold memory put a worker's acknowledgement p99 up from 3 to 17-21 ms.
frozen_objects = 0


def freeze_long_lived() -> int:
    """Collect what is already garbage, then freeze the rest; the number now frozen."""
    global frozen_objects
    gc.collect()
    gc.freeze()
    frozen_objects = gc.get_freeze_count()
    return frozen_objects
