"""The API registry: the one truth about which APIs and versions Castle speaks (P1).

Each module in broker/apis registers its handler with ``@api(key, min, max)``. The
connection looks handlers up here, and ApiVersions is built from this table, so what is
advertised is what is implemented. Registering a key twice fails at import.

A handler is ``fn(ctx, request) -> response``; it may be a coroutine function when it has
to wait (forwarding to another worker, long-poll). It returns a kio response entity, the
body as bytes (Produce), a ``RawResponse`` (bytes and file ranges, for Fetch), or
``NO_RESPONSE`` (acks=0 Produce).
``error_response(request, version, code)`` builds the "everything failed with X" answer
used when a handler raises something unexpected (P4). ``decode(version, frame, offset)``,
when given, replaces kio's decode of the request body (Produce and Fetch: broker/protocol/;
the coordinator APIs keep it undecoded: broker/coordinator/api.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from broker.context import NO_RESPONSE as NO_RESPONSE
from broker.context import RequestContext


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: Callable[..., Any]
    is_async: bool
    error_response: Callable[[Any, int, int], Any] | None
    decode: Callable[[int, bytes | bytearray, int], Any] | None = None
    # A request-wide authorization check (broker/authorization.py): an error code, 0 to go on.
    authorize: Callable[[RequestContext, Any], int] | None = None


REGISTRY: dict[int, HandlerSpec] = {}


def api(api_key: int, name: str, min_version: int, max_version: int,
        error_response: Callable[[Any, int, int], Any] | None = None,
        decode: Callable[[int, bytes | bytearray, int], Any] | None = None,
        authorize: Callable[[RequestContext, Any], int] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as the handler of ``api_key`` for versions min..max (inclusive).

    Whether kio has a schema for each version is checked by tests/unit/protocol/
    test_request_types.py, not here: asking kio imports the schema, and importing every
    served version's took ~0.4 s of each broker start. A request loads its own on first use."""
    import inspect

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if api_key in REGISTRY:
            raise RuntimeError(f"api key {api_key} registered twice ({REGISTRY[api_key].name}, {name})")
        if authorize is not None and error_response is None:
            raise RuntimeError(f"{name}: an authorization check needs an error_response")
        REGISTRY[api_key] = HandlerSpec(api_key, name, min_version, max_version, fn,
                                        inspect.iscoroutinefunction(fn), error_response, decode, authorize)
        return fn

    return register


def supported_ranges() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for ApiVersions, ordered by key."""
    return [(s.api_key, s.min_version, s.max_version) for s in sorted(REGISTRY.values(), key=lambda s: s.api_key)]


