"""Registering a coordinator API: one decorator gives it both halves.

* the worker's half, in broker/dispatch.py's REGISTRY (so ApiVersions advertises what is
  implemented): it keeps the request body undecoded and hands it to the coordinator
  process over the rings (WorkerNode.to_coordinator); only when the worker must answer
  itself (the coordinator process is down) does it decode the body, to build the API's
  "everything failed with X" response;
* the coordinator process's half, in SERVED: decode the body once into the API's typed
  request (kio's entity, or a legacy version's hand decoder) and run ``serve``.

A module of this package is one API family: its answer builders, its ``serve`` functions,
and this decorator on each. Adding an API is adding such a module.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Awaitable, Callable, Generic, Mapping, TypeVar, Union

from kio.static.protocol import Entity

from broker.context import CoordinatorContext, RequestContext
from broker.coordinator.forwarded import Forwarded, RequestBody
from broker.dispatch import api
from broker.links.mesh import PeerUnavailable
from broker.protocol import codec
from broker.protocol.errors import ErrorCode, KafkaError, ProtocolViolation, code_for_exception

Req = TypeVar("Req")
Serve = Callable[[CoordinatorContext, Req], Union[Entity, Awaitable[Entity]]]
ErrorResponse = Callable[[Req, int, int], Entity]
# A version kio lacks (Kafka 4.0 dropped it): (the kio version it is read as, its decoder).
Legacy = Mapping[int, tuple[int, Callable[[int, bytes, int], Req]]]
# The context a request is served with, given the request and the version it is answered in.
ContextFor = Callable[[Forwarded, int], CoordinatorContext]


@dataclass(frozen=True, slots=True)
class Reader(Generic[Req]):
    """An API's request decoder: the body of a version into the typed request, and the
    version its answer is built in (a legacy version's answer is a newer one's bytes)."""

    api_key: int
    legacy: Legacy[Req]

    def __call__(self, version: int, body: bytes) -> tuple[Req, int]:
        """ProtocolViolation if the body is not a request of that version."""
        if version in self.legacy:
            as_version, decode = self.legacy[version]
            return decode(version, body, 0), as_version
        request: Req = codec.decode_request(self.api_key, version, body, 0)
        return request, version


@dataclass(frozen=True, slots=True)
class ServedApi:
    """The coordinator process's half of one API."""

    api_key: int
    name: str
    answer: Callable[[Forwarded, ContextFor], Awaitable[bytes]]


SERVED: dict[int, ServedApi] = {}
# The versions below a coordinator API's min_version read by a hand-written Legacy reader
# (Kafka 4.0 dropped their schemas).
LEGACY_VERSIONS: dict[int, frozenset[int]] = {}


def coordinator_api(api_key: int, name: str, min_version: int, max_version: int, error_response: ErrorResponse[Req],
                    legacy: Legacy[Req] | None = None, lost: ErrorCode = ErrorCode.coordinator_not_available,
                    ) -> Callable[[Serve[Req]], Serve[Req]]:
    """Register ``serve(ctx, request)`` to answer ``api_key`` v min..max (and the
    ``legacy`` versions below min) in the coordinator process.

    ``lost``: the worker's answer when the coordinator process cannot take the request:
    it died holding it (kill -9, a crash: answered as soon as the supervisor reaps it), or
    it is down and no successor serves within the wait (WorkerNode.to_coordinator).
    COORDINATOR_NOT_AVAILABLE by default, as Kafka's coordinator answers while it is not
    active. An API a client sends every few milliseconds (commits) must not get it:
    librdkafka marks the coordinator dead, drops its connection and reconnects, and requests
    failing on the half-open connection mark it dead again, until the member's session
    times out; those APIs answer what makes clients retry in place."""
    read = Reader(api_key, dict(legacy or {}))
    LEGACY_VERSIONS[api_key] = frozenset(read.legacy)  # the rest must be in kio (test_request_types)

    def register(serve: Serve[Req]) -> Serve[Req]:
        async def forward(ctx: RequestContext, request: RequestBody) -> bytes:
            try:
                return await ctx.node.to_coordinator(ctx, request)
            except PeerUnavailable:
                return codec.encode_body(error(request, request.api_version, int(lost)))

        def error(request: RequestBody, version: int, code: int) -> Entity:
            typed, as_version = read(version, request.body)  # ProtocolViolation: the connection closes
            return error_response(typed, as_version, code)

        def keep_body(version: int, frame: bytes | bytearray, body_offset: int) -> RequestBody:
            return RequestBody.of_frame(api_key, version, frame, body_offset)

        forward.__name__ = f"forward_{serve.__name__}"
        # api() refuses a key registered twice, before SERVED is touched.
        api(api_key, name, min([min_version, *read.legacy]), max_version, error, keep_body)(forward)
        return served_in_coordinator(api_key, name, error_response, legacy)(serve)

    return register


def served_in_coordinator(api_key: int, name: str, error_response: ErrorResponse[Req],
                          legacy: Legacy[Req] | None = None) -> Callable[[Serve[Req]], Serve[Req]]:
    """Register only the coordinator process's half of ``api_key``: for an API the worker
    answers itself in part and forwards the rest (InitProducerId: a transactional id goes
    to the transaction coordinator), with the body as the client sent it."""
    read = Reader(api_key, dict(legacy or {}))

    def register(serve: Serve[Req]) -> Serve[Req]:
        async def answer(forwarded: Forwarded, context_for: ContextFor) -> bytes:
            try:
                request, version = read(forwarded.api_version, forwarded.body)
            except ProtocolViolation as exc:  # the worker closes the client's connection, as Kafka does
                raise KafkaError(ErrorCode.invalid_request, str(exc)) from None
            try:
                result = serve(context_for(forwarded, version), request)
                response = await result if inspect.isawaitable(result) else result
            except Exception as exc:
                response = error_response(request, version, int(code_for_exception(exc)))
            return codec.encode_body(response)

        if api_key in SERVED:
            raise RuntimeError(f"{name}: api key {api_key} is served twice in the coordinator")
        SERVED[api_key] = ServedApi(api_key, name, answer)
        return serve

    return register

