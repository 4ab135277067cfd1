"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0.

Behaviour (Kafka's ZkAdminManager): Describe names each user's mechanisms and iteration
counts, never salts or keys; all users when the request names none; a named user with no
credential is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE. Alter applies
deletions and upsertions per user, one result per user: a mechanism other than
SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) is UNSUPPORTED_SASL_MECHANISM; iterations outside
4096-16384, an empty name, salt or salted password UNACCEPTABLE_CREDENTIAL; the same user
and mechanism twice DUPLICATE_RESOURCE; deleting what does not exist RESOURCE_NOT_FOUND.
A user with any refused change gets no change at all. The client sends PBKDF2's output
(salted_password), so the broker only derives the stored and server keys from it.

Credentials are kept by the coordination backend (coordination/credentials.py); every
worker's connections see a change once the store's watch fires (broker/security/
broker_security.py). Store calls may wait on ZooKeeper, so they run on the admin thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.authorization import on_cluster
from broker.context import RequestContext, Response
from broker.dispatch import api
from broker.protocol import codec
from broker.protocol.build import build
from broker.protocol.errors import ErrorCode
from broker.security.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    from_kafka_string,
    from_salted_password,
    to_kafka_string,
)
from coordination.acls.model import Operation

if TYPE_CHECKING:  # ~200 kio classes, for mypy only: none is imported at run time (requests.py)
    from broker.protocol.requests import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

DESCRIBE_KEY = 50
ALTER_KEY = 51
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_OF_NAME = {name: code for code, name in MECHANISM_CODES.items()}


def _describe_error(request: Any, version: int, code: int) -> Any:
    return build(codec.response_class(DESCRIBE_KEY, version), {"throttle_time": 0, "error_code": code,
                                                               "error_message": None, "results": []})


@api(DESCRIBE_KEY, "DescribeUserScramCredentials", 0, 0, error_response=_describe_error,
     authorize=on_cluster(Operation.DESCRIBE))
async def handle_describe(ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> Response:
    store = ctx.node.cluster.credentials()
    stored = await ctx.node.run_admin(store.all)
    named = [user.name for user in request.users or ()]
    results = []
    if not named:
        for user in sorted(stored):
            results.append(_described(user, stored[user]))
    for user in dict.fromkeys(named):
        if named.count(user) > 1:
            results.append({"user": user, "error_code": ErrorCode.duplicate_resource,
                            "error_message": f"Cannot describe SCRAM credentials for the same user twice in a single "
                                             f"request: {user}", "credential_infos": []})
        elif not stored.get(user):
            results.append({"user": user, "error_code": ErrorCode.resource_not_found,
                            "error_message": f"Attempt to describe a user credential that does not exist: {user}",
                            "credential_infos": []})
        else:
            results.append(_described(user, stored[user]))
    return build(codec.response_class(DESCRIBE_KEY, ctx.api_version),
                 {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results})


def _described(user: str, entries: dict[str, str]) -> dict[str, Any]:
    infos = []
    for mechanism, text in sorted(entries.items()):
        if mechanism in MECHANISM_OF_NAME:
            try:
                infos.append({"mechanism": MECHANISM_OF_NAME[mechanism], "iterations": from_kafka_string(text).iterations})
            except ValueError:
                continue  # unreadable: a connection could not use it either
    return {"user": user, "error_code": 0, "error_message": None, "credential_infos": infos}


def _alter_error(request: Any, version: int, code: int) -> Any:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return build(codec.response_class(ALTER_KEY, version),
                 {"throttle_time": 0, "results": [{"user": u, "error_code": code, "error_message": None} for u in users]})


def _refusal(deletions: list[Any], upsertions: list[Any]) -> tuple[int, str] | None:
    """Why one user's changes are refused, or None."""
    seen: set[int] = set()
    for change in [*deletions, *upsertions]:
        if not change.name:
            return ErrorCode.unacceptable_credential, "Username must not be empty"
        if change.mechanism not in MECHANISM_CODES:
            return ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {change.mechanism}"
        if change.mechanism in seen:
            return (ErrorCode.duplicate_resource,
                    "A user credential cannot be altered twice in the same request")
        seen.add(change.mechanism)
    for upsertion in upsertions:
        if upsertion.iterations < MIN_ITERATIONS:
            return ErrorCode.unacceptable_credential, f"Too few iterations: {upsertion.iterations} < {MIN_ITERATIONS}"
        if upsertion.iterations > MAX_ITERATIONS:
            return ErrorCode.unacceptable_credential, f"Too many iterations: {upsertion.iterations} > {MAX_ITERATIONS}"
        if not upsertion.salt or not upsertion.salted_password:
            return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
    return None


@api(ALTER_KEY, "AlterUserScramCredentials", 0, 0, error_response=_alter_error, authorize=on_cluster(Operation.ALTER))
async def handle_alter(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> Response:
    store = ctx.node.cluster.credentials()
    by_user: dict[str, tuple[list[Any], list[Any]]] = {}
    for deletion in request.deletions:
        by_user.setdefault(deletion.name, ([], []))[0].append(deletion)
    for upsertion in request.upsertions:
        by_user.setdefault(upsertion.name, ([], []))[1].append(upsertion)
    stored = await ctx.node.run_admin(store.all)
    results = []
    for user, (deletions, upsertions) in by_user.items():
        refusal = _refusal(deletions, upsertions)
        if refusal is None:
            missing = [MECHANISM_CODES[d.mechanism] for d in deletions
                       if MECHANISM_CODES[d.mechanism] not in stored.get(user, {})]
            if missing:
                refusal = (ErrorCode.resource_not_found,
                           f"Attempt to delete a user credential that does not exist: {user} {missing[0]}")
        if refusal is None:
            try:
                credentials = [(MECHANISM_CODES[u.mechanism],
                                to_kafka_string(from_salted_password(MECHANISM_CODES[u.mechanism], bytes(u.salted_password),
                                                                     bytes(u.salt), u.iterations)))
                               for u in upsertions]
            except ValueError as exc:
                refusal = (ErrorCode.unacceptable_credential, str(exc))
        if refusal is not None:
            results.append({"user": user, "error_code": refusal[0], "error_message": refusal[1]})
            continue

        def apply(user: str = user, deletions: list[Any] = deletions, credentials: list[tuple[str, str]] = credentials) -> None:
            for deletion in deletions:
                store.delete(user, MECHANISM_CODES[deletion.mechanism])
            for mechanism, text in credentials:
                store.set(user, mechanism, text)

        await ctx.node.run_admin(apply)
        results.append({"user": user, "error_code": 0, "error_message": None})
    return build(codec.response_class(ALTER_KEY, ctx.api_version), {"throttle_time": 0, "results": results})
