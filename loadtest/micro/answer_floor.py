"""The least a Python server can do per Produce request: read the frame, send an answer.

    python -m loadtest.micro.answer_floor --port 0 --topic request-cost --records 2

A uvloop server (the event loop Castle's workers run) that answers every request frame
with a well-formed Produce v9 answer (no error, base offsets moving by ``--records`` each
time) and does nothing else: no decoding, no log, no metrics. loadtest.micro.request_cost
``--floor`` measures its CPU per request the same way it measures a broker's, so a
broker's figure can be split into what this machine charges any Python server for a
request (the loop's wakeup, recv, send, and on loopback the peer's wakeup inside the send)
and what the broker itself does. It prints its port on the first line of stdout and
serves until it is terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import struct
import sys
from typing import Any

from broker.partitions.partition_ops import AppendResult
from broker.protocol import fast

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class FloorAnswers(asyncio.Protocol):
    """Answers each whole frame in the order it came; a partial frame waits for its rest."""

    def __init__(self, topic: str, records: int) -> None:
        self.topic = topic
        self.records = records
        self.next_offset = 0
        self.buffer = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        position = 0
        answers = []
        while len(buffer) - position >= 4:
            (size,) = _SIZE.unpack_from(buffer, position)
            if len(buffer) - position - 4 < size:
                break
            # Request header: api key (2), version (2), correlation id (4).
            (correlation_id,) = _CORRELATION.unpack_from(buffer, position + 8)
            position += 4 + size
            body = fast.encode_produce_response(9, [(self.topic, [(0, AppendResult(0, self.next_offset))])])
            self.next_offset += self.records
            answers.append(_SIZE.pack(len(body) + 5) + _CORRELATION.pack(correlation_id) + b"\x00" + body)
        del buffer[:position]
        if answers:
            self.transport.write(b"".join(answers))


async def serve(port: int, topic: str, records: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FloorAnswers(topic, records), "127.0.0.1", port)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.micro.answer_floor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--topic", default="request-cost", help="the topic named in every answer")
    parser.add_argument("--records", type=int, default=2, help="records each request carries (offsets move by this)")
    args = parser.parse_args(argv)
    import uvloop

    uvloop.run(serve(args.port, args.topic, args.records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
