"""A coordinator API's request on its way from a worker to the coordinator process.

The worker reads only the frame's header: the body travels as the client sent it, with
who sent it (client id, host, principal, listener), and the coordinator process decodes it
once. Its layout on the rings (broker/links/peer_codec.py, like every message there)::

    i16 api key, i16 version, string client id, string client host, string principal,
    string listener, then the request body (the rest of the message)
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.links import peer_codec


@dataclass(frozen=True, slots=True)
class RequestBody:
    """What a worker keeps of a coordinator API's frame: the body, not decoded (it is
    decoded only if the worker itself must answer, when the coordinator cannot)."""

    api_key: int
    api_version: int
    body: bytes

    @classmethod
    def of_frame(cls, api_key: int, api_version: int, frame: bytes | bytearray, body_offset: int) -> RequestBody:
        return cls(api_key, api_version, bytes(memoryview(frame)[body_offset:]))


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A request as the coordinator process gets it."""

    api_key: int
    api_version: int
    client_id: str | None
    client_host: str  # "/" and the address, as Kafka's DescribeGroups reports it
    principal: str
    listener: str
    body: bytes

    def parts(self) -> list[peer_codec.Buffer]:
        return peer_codec.encode_serve(self.api_key, self.api_version, self.client_id, self.client_host,
                                       self.principal, self.listener, self.body)

    @classmethod
    def of_message(cls, data: peer_codec.Buffer) -> Forwarded:
        """From a ring message; the body is copied (the ring's space is given back when the
        call's handler returns, and a group request waits)."""
        api_key, api_version, client_id, client_host, principal, listener, body = peer_codec.decode_serve(data)
        return cls(api_key, api_version, client_id, client_host, principal, listener, bytes(body))
