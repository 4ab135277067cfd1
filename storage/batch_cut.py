"""Cut a range of whole batches in a segment file at a byte limit, still at a batch boundary.

A fetch answers (fd, position, length) ranges that os.sendfile sends; when the response's
byte budget ends inside such a range, the range is shortened to the batches that fit.
Batch boundaries are found by reading only the 12 bytes before each batch (baseOffset,
batchLength): record bytes never enter Python, and only the batches up to the cut are
visited.
"""

from __future__ import annotations

import os

from storage.batch import BATCH_LENGTH_POS, LOG_OVERHEAD, MIN_BATCH_LENGTH


def whole_batches_within(fd: int, position: int, length: int, limit: int, *, at_least_one: bool) -> int:
    """Bytes of the whole batches from ``position`` (within ``length``) that fit in ``limit``.

    ``at_least_one``: the first batch counts even when it alone is over ``limit`` (Kafka's
    rule for the first partition with data, so a consumer always makes progress). A torn
    or malformed length prefix ends the walk there: what was counted before it stands.
    """
    if length <= limit:
        return length
    taken = 0
    while taken + LOG_OVERHEAD <= length:
        prefix = os.pread(fd, LOG_OVERHEAD, position + taken)
        if len(prefix) < LOG_OVERHEAD:
            break
        batch_length = int.from_bytes(prefix[BATCH_LENGTH_POS:LOG_OVERHEAD], "big", signed=True)
        if batch_length < MIN_BATCH_LENGTH:
            break
        size = LOG_OVERHEAD + batch_length
        if taken + size > length:
            break
        if taken + size > limit and (taken or not at_least_one):
            break
        taken += size
    return taken
