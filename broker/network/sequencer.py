"""Responses in request order (P5), whatever order their handlers finish in.

Each request takes the next sequence number when its frame is read. A handler that
finishes in order with nothing held back goes straight out (the usual case); one that
finishes early (a later request, while an earlier one waits on another worker or a long
poll) is held until everything before it has gone. acks=0 Produce takes a number and
sends nothing (``None``).
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class ResponseSequencer(Generic[T]):
    __slots__ = ("_emit", "_next_seq", "_next_to_send", "_held")

    def __init__(self, emit: Callable[[T], None]) -> None:
        self._emit = emit  # called with each response, in request order
        self._next_seq = 0
        self._next_to_send = 0
        self._held: dict[int, T | None] = {}

    def take(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    @property
    def in_flight(self) -> int:
        """Requests taken whose responses have not gone out yet."""
        return self._next_seq - self._next_to_send

    def finish(self, seq: int, response: T | None) -> None:
        if seq == self._next_to_send and not self._held:
            self._next_to_send += 1
            if response is not None:
                self._emit(response)
            return
        self._held[seq] = response
        while self._next_to_send in self._held:
            ready = self._held.pop(self._next_to_send)
            self._next_to_send += 1
            if ready is not None:
                self._emit(ready)

    def drop_held(self) -> Iterator[T]:
        """The responses held back, removed (the connection is closing)."""
        held = [r for r in self._held.values() if r is not None]
        self._held.clear()
        return iter(held)
