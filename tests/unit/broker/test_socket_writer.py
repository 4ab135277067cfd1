"""SocketWriter (broker/network/socket_writer.py) over real sockets on a uvloop loop: buffers
go out by sendmsg once per loop turn, file ranges by os.sendfile from a real file, a peer
that does not read parks the rest until the socket is writable again, file descriptors
are closed once their range is sent, and TCP_CORK wraps two or more file ranges on TCP
only (a Unix socketpair has no cork)."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, Callable

import pytest

from broker.context import FileChunk
from broker.network.socket_writer import MAX_IOV, SocketWriter

TIMEOUT = 5.0


def run(coroutine: Any) -> Any:
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


class CorkRecordingSocket(socket.socket):
    """A real TCP socket that also notes each TCP_CORK value set on it (the kernel keeps no
    history of it, and the writer clears it before it returns)."""

    corks: list[int]

    def setsockopt(self, level: int, option: int, value: Any, *rest: Any) -> None:  # type: ignore[override]
        if level == socket.IPPROTO_TCP and option == socket.TCP_CORK:
            self.corks.append(value)
        super().setsockopt(level, option, value, *rest)


def tcp_pair() -> tuple[CorkRecordingSocket, socket.socket]:
    """(the writer's end, the peer's end) of a real loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        peer = socket.create_connection(server.getsockname(), timeout=TIMEOUT)
        accepted, _address = server.accept()
    writer_end = CorkRecordingSocket(accepted.family, accepted.type, accepted.proto, fileno=accepted.detach())
    writer_end.corks = []
    writer_end.setblocking(False)
    return writer_end, peer


def unix_pair() -> tuple[socket.socket, socket.socket]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.settimeout(TIMEOUT)
    return ours, peer


class Outcome:
    """What the writer told its connection."""

    def __init__(self) -> None:
        self.sent = 0
        self.errors: list[OSError] = []

    def on_sent(self) -> None:
        self.sent += 1

    def on_error(self, exc: OSError) -> None:
        self.errors.append(exc)


def writer_on(sock: socket.socket) -> tuple[SocketWriter, Outcome]:
    outcome = Outcome()
    return SocketWriter(sock, asyncio.get_running_loop(), outcome.on_sent, outcome.on_error), outcome


async def receive(peer: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from the peer, read on a thread (a blocking socket with a timeout)."""

    def read() -> bytes:
        got = bytearray()
        while len(got) < size:
            chunk = peer.recv(min(1 << 20, size - len(got)))
            if not chunk:
                break
            got += chunk
        return bytes(got)

    return await asyncio.wait_for(asyncio.to_thread(read), TIMEOUT)


async def turns(count: int = 5) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def fd_open(fd: int, path: str) -> bool:
    """``fd`` is still open on ``path`` (not closed, nor reused since for another file)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


@pytest.fixture
def data_file(tmp_path: Any) -> tuple[str, bytes]:
    content = os.urandom(300_000)
    path = str(tmp_path / "segment.log")
    with open(path, "wb") as handle:
        handle.write(content)
    return path, content


def test_answers_of_one_loop_turn_leave_in_one_flush_in_order():
    async def scenario() -> None:
        ours, peer = unix_pair()
        writer, outcome = writer_on(ours)
        try:
            # More buffers than one sendmsg takes (MAX_IOV), each scheduled as it is answered.
            pieces = [f"answer {i};".encode() for i in range(MAX_IOV * 3 + 5)]
            for piece in pieces:
                writer.queue([piece])
                writer.schedule_flush()
            assert outcome.sent == 0, "nothing is written before the turn ends"
            expected = b"".join(pieces)
            assert writer.out_bytes == len(expected)
            assert await receive(peer, len(expected)) == expected
            await turns()
            assert outcome.sent == 1, "one flush for the whole turn"
            assert writer.idle and writer.out_bytes == 0
            assert outcome.errors == []
        finally:
            writer.close()
            ours.close()
            peer.close()

    run(scenario())


def test_a_peer_that_does_not_read_parks_the_rest_until_the_socket_drains():
    async def scenario() -> None:
        ours, peer = unix_pair()
        writer, outcome = writer_on(ours)
        try:
            big = os.urandom(4 << 20)  # far more than a socket buffer holds
            writer.queue([b"first", big, b"last"])
            writer.flush()
            # The socket filled: the rest waits for writability, nothing is reported sent.
            assert not writer.idle
            assert 0 < writer.out_bytes < len(big) + 9
            assert outcome.sent == 0
            await turns()
            assert outcome.sent == 0, "a full socket does not spin"
            expected = b"first" + big + b"last"
            assert await receive(peer, len(expected)) == expected
            await until(lambda: outcome.sent == 1, "the writer to drain")
            assert writer.idle and writer.out_bytes == 0
            # Drained, the writer stopped watching writability (a socket that stays
            # writable would otherwise call flush, and on_sent, on every turn).
            await asyncio.sleep(0.05)
            assert outcome.sent == 1
            assert outcome.errors == []
        finally:
            writer.close()
            ours.close()
            peer.close()

    run(scenario())


def test_file_ranges_go_out_by_sendfile_between_buffers_and_their_fds_are_closed(data_file):
    path, content = data_file

    async def scenario() -> None:
        ours, peer = unix_pair()
        writer, outcome = writer_on(ours)
        first, second, empty = os.open(path, os.O_RDONLY), os.open(path, os.O_RDONLY), os.open(path, os.O_RDONLY)
        try:
            writer.queue([b"head", FileChunk(first, 1000, 250_000), b"middle", FileChunk(second, 7, 10),
                          FileChunk(empty, 0, 0), b"tail"])
            assert not fd_open(empty, path), "an empty range is dropped (and closed) when queued"
            writer.schedule_flush()
            expected = b"head" + content[1000:251_000] + b"middle" + content[7:17] + b"tail"
            # Two file ranges on a Unix socket: no cork to set, and no failure for trying.
            assert await receive(peer, len(expected)) == expected
            await until(lambda: outcome.sent == 1, "the writer to report it sent everything")
            assert outcome.errors == []
            assert not fd_open(first, path) and not fd_open(second, path), "each range's fd is closed once sent"
        finally:
            writer.close()
            ours.close()
            peer.close()

    run(scenario())


def test_a_file_shorter_than_its_range_fails_the_connection(data_file):
    path, content = data_file

    async def scenario() -> None:
        ours, peer = unix_pair()
        writer, outcome = writer_on(ours)
        try:
            fd = os.open(path, os.O_RDONLY)
            writer.queue([FileChunk(fd, len(content) - 100, 1000)])  # 900 bytes promised past the end
            writer.flush()
            assert len(outcome.errors) == 1 and isinstance(outcome.errors[0], ConnectionError)
            assert outcome.sent == 0
        finally:
            writer.close()
            ours.close()
            peer.close()

    run(scenario())


def test_close_closes_the_file_ranges_still_queued_and_stops_writing(data_file):
    path, _content = data_file

    async def scenario() -> None:
        ours, peer = unix_pair()
        writer, outcome = writer_on(ours)
        try:
            writer.queue([os.urandom(4 << 20)])
            writer.flush()  # the socket fills; the writer waits for writability
            fd = os.open(path, os.O_RDONLY)
            writer.queue([FileChunk(fd, 0, 100)])
            writer.close()
            assert not fd_open(fd, path)
            assert writer.idle
            peer.setblocking(False)
            while True:  # drain: the writer, closed, must not write again when it could
                try:
                    if not peer.recv(1 << 20):
                        break
                except BlockingIOError:
                    break
            await asyncio.sleep(0.05)
            assert outcome.sent == 0 and outcome.errors == []
        finally:
            ours.close()
            peer.close()

    run(scenario())


def test_a_peer_that_closed_fails_the_write():
    async def scenario() -> None:
        ours, peer = unix_pair()
        writer, outcome = writer_on(ours)
        peer.close()
        try:
            writer.queue([b"to nobody"])
            writer.flush()
            assert len(outcome.errors) == 1 and isinstance(outcome.errors[0], (BrokenPipeError, ConnectionResetError))
            assert outcome.sent == 0
        finally:
            writer.close()
            ours.close()

    run(scenario())


def test_two_or_more_file_ranges_go_out_corked_on_tcp_and_the_cork_is_cleared(data_file):
    path, content = data_file

    async def scenario() -> None:
        ours, peer = tcp_pair()
        writer, outcome = writer_on(ours)
        try:
            # One range: nothing to coalesce, no cork.
            writer.queue([b"h", FileChunk(os.open(path, os.O_RDONLY), 0, 100)])
            writer.flush()
            assert await receive(peer, 101) == b"h" + content[:100]
            assert ours.corks == []
            # Two ranges: corked for the flush, uncorked when it ends.
            writer.queue([FileChunk(os.open(path, os.O_RDONLY), 0, 50), b"-",
                          FileChunk(os.open(path, os.O_RDONLY), 50, 50)])
            writer.flush()
            assert await receive(peer, 101) == content[:50] + b"-" + content[50:100]
            assert ours.corks == [1, 0]
            assert ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 0
            assert outcome.sent == 2 and outcome.errors == []
        finally:
            writer.close()
            ours.close()
            peer.close()

    run(scenario())


def test_a_full_tcp_socket_uncorks_before_it_waits(data_file):
    path, content = data_file

    async def scenario() -> None:
        ours, peer = tcp_pair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        writer, outcome = writer_on(ours)
        try:
            ranges = [FileChunk(os.open(path, os.O_RDONLY), 0, len(content)) for _ in range(20)]
            writer.queue(list(ranges))
            writer.flush()
            # Full before 6 MB went out: waiting with the cork on would hold the last
            # partial segment back for the kernel's 200 ms timer.
            assert not writer.idle and outcome.sent == 0
            assert ours.corks == [1, 0]
            assert ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 0
            assert await receive(peer, 20 * len(content)) == content * 20
            await until(lambda: outcome.sent == 1, "the writer to drain")
            assert ours.corks[-1] == 0 and len(ours.corks) >= 4, "each writable turn corks and uncorks again"
            assert ours.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 0
            assert not any(fd_open(r.fd, path) for r in ranges)
        finally:
            writer.close()
            ours.close()
            peer.close()

    run(scenario())
