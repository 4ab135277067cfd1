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


def test_every_version_served_has_kio_schema_or_its_own_reader():
    """Registration does not ask kio (that imports every schema at start): this does. A
    version without a kio schema is served only by a hand-written decoder: a worker API's
    own (Produce, Fetch, ListOffsets v0), or a coordinator API's legacy reader (the
    coordinator's forwarding registers a decoder for every version, so only its legacy
    versions count)."""
    from broker.coordinator.api import LEGACY_VERSIONS

    apis.load_all()

    def reads_it_by_hand(key: int, version: int) -> bool:
        if key in LEGACY_VERSIONS:
            return version in LEGACY_VERSIONS[key]
        return dispatch.REGISTRY[key].decode is not None

    missing = [(spec.name, version) for key, spec in dispatch.REGISTRY.items()
               for version in range(spec.min_version, spec.max_version + 1)
               if request_class(key, version) is None and not reads_it_by_hand(key, version)]
    assert missing == []
    assert LEGACY_VERSIONS, "the coordinator APIs registered their legacy versions"


def test_a_broker_imports_neither_the_unions_nor_every_schema_at_start():
    """What the supervisor imports before it forks (apis.load_all) leaves kio's schemas to first
    use: the unions module (215 classes) and every served version's schema took 0.85 s of
    each start. A fresh interpreter, since this test module imports the unions itself."""
    import subprocess
    import sys

    probe = ("import sys; from broker import apis; apis.load_all(); "
             "print('broker.protocol.requests' in sys.modules, sum(m.startswith('kio.schema.') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    unions_loaded, schema_modules = done.stdout.split()
    assert unions_loaded == "False"
    assert int(schema_modules) < 150, schema_modules  # 85 today (direct imports); 856 when every version loaded
