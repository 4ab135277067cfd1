"""Worker-to-worker IPC (broker/ipc.py) over a real Unix socket: plain and coroutine ops,
errors carried as Kafka error codes, and a call that gets no answer timing out."""

from __future__ import annotations

import asyncio
import os
import tempfile

import pytest

from broker.ipc import IpcServer, PeerLink, make_listener, socket_path
from broker.protocol.errors import ErrorCode, KafkaError


async def _pair(ops: dict) -> tuple[IpcServer, PeerLink, str]:
    run_dir = tempfile.mkdtemp(prefix="ipc", dir="/tmp")  # sun_path is short: not under pytest's tmp_path
    server = IpcServer(make_listener(run_dir, 1), ops, {})
    await server.start()
    return server, PeerLink(1, socket_path(run_dir, 1)), run_dir


def test_plain_and_coroutine_ops_answer_and_errors_keep_their_code():
    async def slow_double(x: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * x

    def refuse(_x: int) -> int:
        raise KafkaError(ErrorCode.not_leader_or_follower, "not mine")

    async def scenario() -> None:
        server, link, run_dir = await _pair({"add": lambda a, b: a + b, "double": slow_double, "refuse": refuse})
        try:
            results = await asyncio.gather(*(link.call("add", i, 1) for i in range(100)), link.call("double", 21))
            assert results == [*range(1, 101), 42]
            with pytest.raises(KafkaError) as raised:
                await link.call("refuse", 1)
            assert raised.value.code == ErrorCode.not_leader_or_follower
        finally:
            link.close()
            server.close()
            os.unlink(socket_path(run_dir, 1))

    asyncio.run(scenario())


def test_a_call_without_an_answer_times_out_and_a_late_answer_is_dropped():
    async def scenario() -> None:
        gate = asyncio.Event()

        async def stuck() -> str:
            await gate.wait()
            return "late"

        server, link, run_dir = await _pair({"stuck": stuck, "add": lambda a, b: a + b})
        try:
            with pytest.raises(KafkaError) as raised:
                await link.call("stuck", timeout=0.2)
            assert raised.value.code == ErrorCode.request_timed_out
            gate.set()  # the late answer arrives for a call nobody waits for
            assert await link.call("add", 2, 3) == 5
            assert link._pending == {}
        finally:
            link.close()
            server.close()
            os.unlink(socket_path(run_dir, 1))

    asyncio.run(scenario())


def test_a_memoryview_argument_reaches_the_peer_as_its_bytes():
    """Produce records are views into the request buffer; forwarded, they arrive as bytes."""
    async def scenario() -> None:
        server, link, run_dir = await _pair({"echo": lambda items: [(type(r).__name__, r) for r in items]})
        try:
            frame = bytearray(b"headerRECORDS")
            answer = await link.call("echo", [memoryview(frame)[6:], b"plain"])
            assert answer == [("bytes", b"RECORDS"), ("bytes", b"plain")]
        finally:
            link.close()
            server.close()
            os.unlink(socket_path(run_dir, 1))

    asyncio.run(scenario())
