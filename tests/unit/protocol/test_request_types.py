"""broker/protocol/requests.py types each handler's request as the union of kio's request
classes over the versions Castle serves: every union must cover exactly the registered
range (dispatch.REGISTRY), so a version added to a handler is added to its type too."""

from __future__ import annotations

import typing

from broker import apis, dispatch
from broker.protocol import requests
from broker.protocol.codec import request_class


def test_each_union_covers_exactly_the_versions_served():
    apis.load_all()
    hand_decoded = {0, 1}  # Produce and Fetch: broker/protocol/produce_request.py, fetch_request.py
    assert set(requests.BY_KEY) == set(dispatch.REGISTRY) - hand_decoded
    for key, union in requests.BY_KEY.items():
        spec = dispatch.REGISTRY[key]
        served = {request_class(key, version) for version in range(spec.min_version, spec.max_version + 1)}
        if None in served:  # versions Kafka 4.0 dropped: a hand-written decoder reads them
            assert spec.decode is not None, spec.name
            served.discard(None)
        members = typing.get_args(union) or (union,)  # a union of one is that class
        assert set(members) == served, spec.name
