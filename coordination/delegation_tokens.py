"""Where delegation tokens are kept: in ZooKeeper as Kafka 3.9 keeps them, or in a file.

A token's information is Kafka's TokenInformation: its id, owner, requester and renewers
(principals, "User:alice"), and three times in epoch milliseconds (issue, expiry, max). Its
HMAC is never stored: it is HmacSHA512(delegation.token.secret.key, tokenId), computed by
whoever holds the secret (broker/security/delegation_tokens.py).

ZooKeeper, as Kafka in ZooKeeper mode (kafka.zk.ZkData DelegationToken*ZNode,
DelegationTokenManagerZk), relative to the chroot::

    /delegation_token/tokens/<tokenId>                  {"version":3,"owner":"User%3Aalice",
                                                         "tokenRequester":"User%3Aalice","renewers":[...],
                                                         "issueTimestamp":..,"maxTimestamp":..,
                                                         "expiryTimestamp":..,"tokenId":".."}
    /delegation_token/token_changes/token_change_<seq>  the token id (UTF-8), after every change

Principals are written through Kafka's Sanitizer, as Kafka writes them. A change and its
notification are one conditional transaction (coordination/zk_update.py), so two brokers
renewing the same token cannot lose each other's write.

The single-machine backend keeps one file (coordination/private_file.py)::

    <data_dir>/delegation-tokens.json   {"version":1,"tokens":[<the znode's map>, ...]}

What a change means (renew, expire, the owner's rights) is the caller's (broker/apis/
delegation_tokens.py): it hands ``change`` a plan that sees the stored token and answers
what to write.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Protocol, TypeVar

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from coordination.credentials import desanitize, sanitize
from coordination.private_file import PrivateJsonFile
from coordination.watchers import Watcher
from coordination.zk_update import CallWrapper, Done, Write, ZnodeUpdater, direct
from coordination.zk_watch import ZkChangeWatch

log = logging.getLogger(__name__)

R = TypeVar("R")

ROOT_PATH = "/delegation_token"
TOKENS_PATH = f"{ROOT_PATH}/tokens"
CHANGES_PATH = f"{ROOT_PATH}/token_changes"
CHANGE_PREFIX = f"{CHANGES_PATH}/token_change_"
ZNODE_VERSION = 3  # DelegationTokenManagerZk.CurrentVersion

FILE_NAME = "delegation-tokens.json"
FILE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class TokenInfo:
    """Kafka's TokenInformation; principals as "Type:name"."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        """Kafka's test (DelegationTokenManager.expireTokens): past its expiry or its max."""
        return self.max_ms < now_ms or self.expiry_ms < now_ms


DELETE = "delete"
# What a plan answers: the token to write, DELETE, or None to leave the store as it is; and its result.
Step = tuple["TokenInfo | str | None", R]
Plan = Callable[["TokenInfo | None"], "Step[R]"]


def encode(info: TokenInfo) -> dict[str, Any]:
    """The znode's map (DelegationTokenManagerZk.toJsonCompatibleMap)."""
    return {"version": ZNODE_VERSION, "owner": sanitize(info.owner), "tokenRequester": sanitize(info.requester),
            "renewers": [sanitize(r) for r in info.renewers], "issueTimestamp": info.issue_ms,
            "maxTimestamp": info.max_ms, "expiryTimestamp": info.expiry_ms, "tokenId": info.token_id}


def decode(doc: Any) -> TokenInfo:
    """A znode's map (DelegationTokenManagerZk.fromBytes); ValueError for what Kafka would refuse."""
    try:
        version = doc["version"]
        if not isinstance(version, int) or not 0 < version <= ZNODE_VERSION:
            raise ValueError(f"unsupported token version {version!r}")
        owner = desanitize(doc["owner"])
        # Before version 3 the requester was not kept: it is the owner.
        requester = desanitize(doc["tokenRequester"]) if version >= 3 else owner
        renewers = tuple(desanitize(r) for r in doc["renewers"])
        times = [doc[key] for key in ("issueTimestamp", "maxTimestamp", "expiryTimestamp")]
        token_id = doc["tokenId"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a delegation token: {exc!r}") from None
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in times) or not isinstance(token_id, str):
        raise ValueError("not a delegation token: timestamps must be integers and tokenId a string")
    for principal in (owner, requester, *renewers):
        if ":" not in principal:
            raise ValueError(f"not a principal: {principal!r}")
    return TokenInfo(token_id, owner, requester, renewers, times[0], times[1], times[2])


class TokenStore(Protocol):
    def all(self) -> dict[str, TokenInfo]:
        """Every stored token, by id."""
        ...

    def change(self, token_id: str, plan: "Plan[R]") -> R:
        """Read the token (None: there is none), and write what ``plan`` answers, atomically."""
        ...

    def watch(self, fn: Watcher) -> None:
        """``fn()`` now and whenever a token may have changed; must not block."""
        ...

    def close(self) -> None:
        ...


class ConcurrentChanges(RuntimeError):
    """Other writers kept changing the same token faster than we could read and write."""


# ----------------------------------------------------------------------------- ZooKeeper
class ZooKeeperTokens:
    """TokenStore over a started KazooClient (not owned). Methods block: use an executor."""

    def __init__(self, client: KazooClient, call: CallWrapper | None = None) -> None:
        self._client = client
        self._call: CallWrapper = call if call is not None else direct
        self._updater = ZnodeUpdater(client, self._call, (TOKENS_PATH, CHANGES_PATH), ConcurrentChanges)
        self._watch = ZkChangeWatch(client, (CHANGES_PATH, TOKENS_PATH), self._updater.ensure_parents,
                                    "delegation token", log)

    def all(self) -> dict[str, TokenInfo]:
        def once() -> dict[str, TokenInfo]:
            try:
                names = sorted(self._client.get_children(TOKENS_PATH))
            except NoNodeError:
                return {}
            pending = [(name, self._client.get_async(f"{TOKENS_PATH}/{name}")) for name in names]
            found: dict[str, TokenInfo] = {}
            for name, result in pending:
                try:
                    data, _ = result.get()
                    found[name] = decode(orjson.loads(data))
                except NoNodeError:
                    continue
                except ValueError as exc:  # orjson's error is a ValueError too
                    log.warning("ignoring the delegation token %s: %s", name, exc)
            return found

        return self._call(once)

    def change(self, token_id: str, plan: "Plan[R]") -> R:
        if not token_id or "/" in token_id or token_id in (".", ".."):
            raise ValueError(f"not a token id: {token_id!r}")
        path = f"{TOKENS_PATH}/{token_id}"

        def zk_plan(data: bytes | None, exists: bool, _conflicts: int) -> Done[R] | Write[R]:
            current = None
            if exists and data:
                try:
                    current = decode(orjson.loads(data))
                except ValueError as exc:
                    log.warning("the delegation token %s is unreadable: %s", token_id, exc)
            target, result = plan(current)
            if target is None or (target == DELETE and not exists):
                return Done(result)
            if target == DELETE:
                return Write(b"", result, delete=True)
            assert isinstance(target, TokenInfo)
            return Write(orjson.dumps(encode(target)), result)

        return self._updater.update(path, CHANGE_PREFIX, token_id.encode(), zk_plan)

    def watch(self, fn: Watcher) -> None:
        self._watch.watch(fn)

    def close(self) -> None:
        self._watch.close()


# ----------------------------------------------------------------------------- local file
def _decode_file(path: str, doc: Any, data: bytes) -> dict[str, TokenInfo]:
    rows = doc.get("tokens") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: expected {{\"version\":1,\"tokens\":[...]}}, got {data[:200]!r}")
    out: dict[str, TokenInfo] = {}
    for row in rows:
        try:
            info = decode(row)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        out[info.token_id] = info
    return out


def _encode_file(tokens: dict[str, TokenInfo]) -> bytes:
    return orjson.dumps({"version": FILE_VERSION, "tokens": [encode(tokens[key]) for key in sorted(tokens)]},
                        option=orjson.OPT_INDENT_2)


class LocalTokens:
    """TokenStore in ``<data_dir>/delegation-tokens.json`` (0600). Thread- and process-safe."""

    def __init__(self, data_dir: str) -> None:
        self._file = PrivateJsonFile(data_dir, FILE_NAME, decode=_decode_file, encode=_encode_file, empty=dict,
                                     what="delegation token", log=log)
        self.path = self._file.path

    def all(self) -> dict[str, TokenInfo]:
        return self._file.read()

    def change(self, token_id: str, plan: "Plan[R]") -> R:
        outcome: list[R] = []

        def apply(tokens: dict[str, TokenInfo]) -> bool:
            target, result = plan(tokens.get(token_id))
            outcome.append(result)
            if target is None:
                return False
            if target == DELETE:
                return tokens.pop(token_id, None) is not None
            assert isinstance(target, TokenInfo)
            tokens[token_id] = target
            return True

        self._file.update(apply)
        return outcome[-1]

    def watch(self, fn: Watcher) -> None:
        self._file.watch(fn)

    def close(self) -> None:
        self._file.close()
