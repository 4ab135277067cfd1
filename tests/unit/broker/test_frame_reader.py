"""The sans-I/O frame reader and the response sequencer that broker/network/connection.py is built
on: frames cut at any byte boundary come out whole, large frames are received into their
own buffer, bad sizes are refused before anything is allocated, responses leave in request
order."""

from __future__ import annotations

import os
import struct

import pytest

from broker.network.sequencer import ResponseSequencer
from broker.protocol.errors import ProtocolViolation
from broker.protocol.frame_reader import LARGE_FRAME, FrameReader


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _read_all(reader: FrameReader, stream: bytes, piece: int) -> list[bytes]:
    frames: list[bytes] = []
    position = 0
    while position < len(stream):
        if reader.receiving_big:
            with reader.big_space() as space:
                count = min(len(space), piece, len(stream) - position)
                space[:count] = stream[position:position + count]
            position += count
            frame = reader.big_received(count)
            if frame is not None:
                frames.append(bytes(frame))
            continue
        reader.feed(stream[position:position + piece])
        position += piece
        while (frame := reader.next_frame()) is not None:
            frames.append(frame)
    return frames


@pytest.mark.parametrize("piece", [1, 3, 4, 5, 1000, 70_000, 1 << 20])
def test_frames_come_out_whole_whatever_the_reads(piece):
    bodies = [b"", b"a", os.urandom(100), os.urandom(LARGE_FRAME - 1), os.urandom(LARGE_FRAME), os.urandom(300_000),
              os.urandom(7)]
    reader = FrameReader(1 << 21)
    assert _read_all(reader, b"".join(_framed(b) for b in bodies), piece) == bodies
    assert not reader.buffered and not reader.receiving_big


def test_a_large_frame_is_received_into_its_own_buffer():
    reader = FrameReader(1 << 21)
    body = os.urandom(200_000)
    reader.feed(_framed(body)[:1000])
    assert reader.next_frame() is None and reader.receiving_big
    with reader.big_space() as space:
        assert len(space) == len(body) - 996
        space[:] = body[996:]
    frame = reader.big_received(len(body) - 996)
    assert isinstance(frame, bytearray) and frame == body
    reader.feed(_framed(b"xyz")[:5])
    assert reader.next_frame() is None and reader.buffered and not reader.receiving_big
    reader.feed(_framed(b"xyz")[5:])
    assert reader.next_frame() == b"xyz"


@pytest.mark.parametrize("size", [-1, -(2**31), 1001])
def test_a_size_out_of_bounds_is_refused_before_allocating(size):
    reader = FrameReader(1000)
    reader.feed(struct.pack(">i", size) + b"x")
    with pytest.raises(ProtocolViolation):
        reader.next_frame()


def test_responses_leave_in_request_order_and_no_response_takes_its_place():
    sent: list[str] = []
    sequencer: ResponseSequencer[str] = ResponseSequencer(sent.append)
    seqs = [sequencer.take() for _ in range(5)]
    sequencer.finish(seqs[2], "c")
    sequencer.finish(seqs[1], None)  # acks=0
    assert sent == [] and sequencer.in_flight == 5
    sequencer.finish(seqs[0], "a")
    assert sent == ["a", "c"] and sequencer.in_flight == 2
    sequencer.finish(seqs[4], "e")
    assert list(sequencer.drop_held()) == ["e"]
    sequencer.finish(seqs[3], "d")
    assert sent == ["a", "c", "d"]
