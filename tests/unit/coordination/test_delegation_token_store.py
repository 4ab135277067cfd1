"""Delegation token stores: ZooKeeperTokens against a real ZooKeeper (Kafka 3.9's znodes and
change notifications), LocalTokens on a real file; the removal of expired tokens on both."""

from __future__ import annotations

import os
import queue
import stat
from pathlib import Path

import pytest

from broker.security.delegation_tokens import remove_expired
from coordination.delegation_tokens import (
    CHANGES_PATH,
    DELETE,
    TOKENS_PATH,
    LocalTokens,
    TokenInfo,
    ZooKeeperTokens,
    decode,
)
from tests.unit.coordination.store_helpers import MakeClient, next_call, run_in_threads, znode_json

pytestmark = pytest.mark.timeout(60)

ALICE = TokenInfo("tok-1", "User:alice@EXAMPLE.COM", "User:admin", ("User:bob",), 1000, 9000, 5000)


def _put(info: TokenInfo):  # a plan that writes ``info``
    return lambda _current: (info, "written")


@pytest.mark.zookeeper
def test_zookeeper_token_lands_in_kafkas_znode_with_a_change_notification(make_client: MakeClient) -> None:
    raw = make_client()
    store = ZooKeeperTokens(make_client())
    assert store.change("tok-1", _put(ALICE)) == "written"
    # DelegationTokenManagerZk.toJsonCompatibleMap: principals through Kafka's Sanitizer.
    assert znode_json(raw, f"{TOKENS_PATH}/tok-1") == {
        "version": 3, "owner": "User%3Aalice%40EXAMPLE.COM", "tokenRequester": "User%3Aadmin",
        "renewers": ["User%3Abob"], "issueTimestamp": 1000, "maxTimestamp": 9000, "expiryTimestamp": 5000,
        "tokenId": "tok-1"}
    changes = sorted(raw.get_children(CHANGES_PATH))
    assert [c.startswith("token_change_") for c in changes] == [True]
    assert raw.get(f"{CHANGES_PATH}/{changes[0]}")[0] == b"tok-1"
    assert store.all() == {"tok-1": ALICE}

    assert store.change("tok-1", lambda current: (DELETE, current)) == ALICE
    assert store.all() == {}
    assert len(raw.get_children(CHANGES_PATH)) == 2  # the deletion is announced too
    # Deleting what is gone writes and announces nothing.
    assert store.change("tok-1", lambda current: (DELETE, current)) is None
    assert len(raw.get_children(CHANGES_PATH)) == 2


@pytest.mark.zookeeper
def test_zookeeper_reads_a_token_kafka_wrote_before_version_3(make_client: MakeClient) -> None:
    raw = make_client()
    raw.ensure_path(TOKENS_PATH)
    raw.create(f"{TOKENS_PATH}/old", b'{"version":1,"owner":"User%3Acarol","renewers":[],"issueTimestamp":1,'
                                     b'"maxTimestamp":3,"expiryTimestamp":2,"tokenId":"old"}')
    raw.create(f"{TOKENS_PATH}/junk", b"not json")
    assert ZooKeeperTokens(make_client()).all() == {"old": TokenInfo("old", "User:carol", "User:carol", (), 1, 3, 2)}


@pytest.mark.zookeeper
def test_zookeeper_watch_fires_for_another_clients_change(make_client: MakeClient) -> None:
    watcher, writer = ZooKeeperTokens(make_client()), ZooKeeperTokens(make_client())
    calls: queue.Queue[str] = queue.Queue()
    watcher.watch(lambda: calls.put("fired"))
    next_call(calls)  # the registration's own call
    writer.change("tok-1", _put(ALICE))
    next_call(calls)
    assert watcher.all() == {"tok-1": ALICE}
    watcher.close()
    writer.close()


@pytest.mark.zookeeper
def test_zookeeper_concurrent_renewals_lose_no_write(make_client: MakeClient) -> None:
    stores = [ZooKeeperTokens(make_client()) for _ in range(4)]
    stores[0].change("tok-1", _put(ALICE))

    def bump(store: ZooKeeperTokens) -> None:
        for _ in range(5):
            store.change("tok-1", lambda current: (TokenInfo(**{**current.__dict__, "expiry_ms": current.expiry_ms + 1}),
                                                   None))

    assert run_in_threads(bump, stores) == []
    assert stores[0].all()["tok-1"].expiry_ms == ALICE.expiry_ms + 20


def test_local_store_round_trip_private_file_and_watch(tmp_path: Path) -> None:
    store = LocalTokens(str(tmp_path))
    calls: queue.Queue[str] = queue.Queue()
    store.watch(lambda: calls.put("fired"))
    next_call(calls)
    store.change("tok-1", _put(ALICE))
    next_call(calls)
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    # Another process (a second store on the same file) sees it: tokens survive a restart.
    assert LocalTokens(str(tmp_path)).all() == {"tok-1": ALICE}
    assert store.change("tok-1", lambda current: (None, current)) == ALICE  # a plan that writes nothing
    store.change("tok-1", lambda current: (DELETE, None))
    assert LocalTokens(str(tmp_path)).all() == {}
    store.close()


def test_remove_expired_deletes_only_expired_tokens(tmp_path: Path) -> None:
    store = LocalTokens(str(tmp_path))
    live = TokenInfo("live", "User:a", "User:a", (), 0, 10_000, 8_000)
    past_expiry = TokenInfo("old", "User:a", "User:a", (), 0, 10_000, 4_000)
    past_max = TokenInfo("max", "User:a", "User:a", (), 0, 4_000, 4_000)
    for info in (live, past_expiry, past_max):
        store.change(info.token_id, _put(info))
    assert sorted(remove_expired(store, now=5_000)) == ["max", "old"]
    assert store.all() == {"live": live}
    store.close()


@pytest.mark.parametrize("doc", [
    {"version": 4, "owner": "User%3Aa", "tokenRequester": "User%3Aa", "renewers": [], "issueTimestamp": 1,
     "maxTimestamp": 1, "expiryTimestamp": 1, "tokenId": "t"},
    {"version": 3, "owner": "User%3Aa", "renewers": [], "issueTimestamp": 1, "maxTimestamp": 1,
     "expiryTimestamp": 1, "tokenId": "t"},
    {"version": 3, "owner": "alice", "tokenRequester": "User%3Aa", "renewers": [], "issueTimestamp": 1,
     "maxTimestamp": 1, "expiryTimestamp": 1, "tokenId": "t"},
    {"version": 3, "owner": "User%3Aa", "tokenRequester": "User%3Aa", "renewers": [], "issueTimestamp": "1",
     "maxTimestamp": 1, "expiryTimestamp": 1, "tokenId": "t"},
])
def test_decode_refuses_what_kafka_would(doc: dict) -> None:
    with pytest.raises(ValueError):
        decode(doc)
