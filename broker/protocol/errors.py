"""One error table (kio's ErrorCode, generated from Kafka's Errors) and exceptions -> codes.

Expected conditions are error codes in responses at the narrowest scope (P3); these
exceptions carry a code across layers (the storage layer's StorageError carries its own
``kafka_error_code``). ``ProtocolViolation`` is different: the request cannot be parsed
or answered, and the connection is closed, as Kafka does.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from storage.errors import StorageError

log = logging.getLogger(__name__)

__all__ = ["ErrorCode", "KafkaError", "ProtocolViolation", "code_for_exception"]


class KafkaError(Exception):
    """An expected failure with its Kafka error code."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


class ProtocolViolation(Exception):
    """The peer broke the framing or sent something unparseable: close the connection."""


def code_for_exception(exc: BaseException) -> ErrorCode:
    """The code for ``exc``; anything unexpected is logged with its traceback."""
    if isinstance(exc, KafkaError):
        return exc.code
    if isinstance(exc, StorageError):
        return ErrorCode(exc.kafka_error_code)
    log.error("unexpected error, answered UNKNOWN_SERVER_ERROR", exc_info=exc)
    return ErrorCode.unknown_server_error
