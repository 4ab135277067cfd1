"""Random corruption of a request body, shared by the hand-written decoders' tests."""

from __future__ import annotations

import random
from typing import Any, Callable

from broker.protocol.errors import ProtocolViolation


def decode_corrupted(decode: Callable[[int, bytes, int], Any], version: int, body: bytes, rounds: int = 3000) -> int:
    """Decode ``rounds`` copies of ``body`` with 1-4 random bytes overwritten (seeded by
    the version). ProtocolViolation is the only exception allowed out; anything else fails
    the calling test. Returns how many copies decoded without one."""
    rng = random.Random(version)
    decoded = 0
    for _ in range(rounds):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        try:
            decode(version, bytes(mutated), 0)
            decoded += 1
        except ProtocolViolation:
            pass
    return decoded
