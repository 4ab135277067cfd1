"""One AdminClient per command, bounded by one deadline, with errors an operator can read.

Why a deadline for the whole command rather than a timeout per call: a command makes a
few requests in a row (reset-offsets: describe the group, fetch its offsets, list log
offsets, commit), and ``--timeout`` is what the operator waits at most, whatever the
number of steps. Each request gets the time that is left as its ``request_timeout``, so
librdkafka itself gives up in time and the futures always resolve.

librdkafka's own log lines ("Connect to ipv4#127.0.0.1:1 failed ...", several a second
while a broker is down) are silenced unless ``--verbose``: the command reports the
failure once, in one line, when its deadline passes.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any, Callable, Iterable, Mapping, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

T = TypeVar("T")

# librdkafka's local codes meaning "no broker answered", not "the broker said no".
_UNREACHABLE = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
                KafkaError._TIMED_OUT_QUEUE}
# A little longer than the request timeout, so librdkafka's own timeout error (which
# says what it was waiting for) normally wins over ours.
_GRACE = 2.0
# Below this, a request could not even be sent in time: give up before trying.
_MIN_REQUEST = 0.05


class AdminError(Exception):
    """An expected failure: printed as one line on stderr, exit code ``code``, no traceback.

    ``kafka_code`` is the Kafka error code behind it, when there is one, so a command
    can accept some outcomes (``--if-exists``) without parsing messages.
    """

    code = 1

    def __init__(self, message: str, kafka_code: int | None = None) -> None:
        super().__init__(message)
        self.kafka_code = kafka_code


class UsageError(AdminError):
    """The command line itself is wrong (exit code 2, as argparse uses)."""

    code = 2


class Unreachable(AdminError):
    """No broker answered before the deadline: ends the whole command."""


def explain(error: KafkaError, subject: str | None = None) -> str:
    """One line for a KafkaError: the subject, what happened, and Kafka's error name."""
    name = error.name()
    text = error.str()
    if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and subject and subject.startswith("topic "):
        what = f"{subject} does not exist"
    elif error.code() == KafkaError.GROUP_ID_NOT_FOUND and subject:
        what = f"{subject} does not exist"
    elif error.code() == KafkaError.NON_EMPTY_GROUP and subject:
        what = f"{subject} still has active members; stop its consumers first"
    elif error.code() == KafkaError.TOPIC_ALREADY_EXISTS and subject:
        what = f"{subject} already exists"
    elif subject and subject.lower() not in text.lower():
        what = f"{subject}: {text}"
    else:
        what = text  # the broker's message already names it
    return f"{what} ({name})"


class Session:
    """An AdminClient for one command, with the command's deadline."""

    def __init__(self, bootstrap: str, timeout: float, settings: Mapping[str, str], verbose: bool = False) -> None:
        if timeout <= 0:
            raise UsageError("--timeout must be more than 0 seconds")
        self.bootstrap = bootstrap
        self.settings = dict(settings)  # for the commands that also connect by themselves (broker/admin/wire.py)
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        config: dict[str, str | int | float | bool] = {} if verbose else {"log_level": 0}
        config.update(settings)
        config["bootstrap.servers"] = bootstrap
        self._metadata: ClusterMetadata | None = None
        try:
            self.admin = AdminClient(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise UsageError(f"bad client settings: {_exception_text(exc)}") from None

    # ------------------------------------------------------------------ time
    def remaining(self) -> float:
        """Seconds left before the deadline; raises the "no answer" error when none are."""
        left = self.deadline - time.monotonic()
        if left < _MIN_REQUEST:
            raise self.unreachable()
        return left

    def unreachable(self, detail: str | None = None) -> Unreachable:
        why = f" ({detail})" if detail else ""
        return Unreachable(f"no answer from {self.bootstrap} within {self.timeout:g} s{why}; "
                          "is the broker running and --bootstrap-server right?")

    def request_options(self) -> dict[str, float]:
        """``request_timeout`` for an AdminClient call made now."""
        return {"request_timeout": self.remaining()}

    def operation_options(self) -> dict[str, float]:
        """``request_timeout`` and ``operation_timeout`` (create/delete topics, partitions)."""
        left = self.remaining()
        return {"request_timeout": left, "operation_timeout": left}

    # ------------------------------------------------------------------ waiting
    def wait(self, future: concurrent.futures.Future[Any], subject: str | None = None) -> Any:
        """The future's result, or AdminError with one line naming ``subject``."""
        try:
            return future.result(timeout=max(self.deadline - time.monotonic(), 0.0) + _GRACE)
        except KafkaException as exc:
            raise self.error(exc, subject) from None
        except concurrent.futures.TimeoutError:
            raise self.unreachable() from None

    def wait_each(self, futures: Mapping[T, concurrent.futures.Future[Any]],
                  subject: Callable[[T], str] | None = None) -> tuple[dict[T, Any], dict[T, AdminError]]:
        """Every future's result, keyed as given, and the error of each failed key.

        ``subject(key)`` names a key in its message. "No answer" is not a per-key
        failure: it ends the command (the other keys would only time out too).
        """
        results: dict[T, Any] = {}
        failures: dict[T, AdminError] = {}
        for key, future in futures.items():
            try:
                results[key] = self.wait(future, subject(key) if subject else str(key))
            except Unreachable:
                raise
            except AdminError as exc:
                failures[key] = exc
        return results, failures

    def error(self, exc: BaseException, subject: str | None = None) -> AdminError:
        """Translate a KafkaException from librdkafka into AdminError."""
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if error is None:
            return AdminError(f"{subject}: {exc}" if subject else str(exc))
        if error.code() in _UNREACHABLE:
            return self.unreachable(error.str())
        return AdminError(explain(error, subject), error.code())

    def check(self, error: KafkaError | None, subject: str) -> None:
        """Raise AdminError for a per-item error carried in a result (not raised by librdkafka)."""
        if error is not None and error.code() != KafkaError.NO_ERROR:
            if error.code() in _UNREACHABLE:
                raise self.unreachable(error.str())
            raise AdminError(explain(error, subject), error.code())

    # ------------------------------------------------------------------ metadata
    def metadata(self) -> ClusterMetadata:
        """One Metadata answer for all topics, fetched once per command (no command reads
        it after changing the cluster).

        All topics are asked for even when only some are wanted: a Metadata request that
        names a topic may create it on a broker with auto.create.topics.enable.
        """
        if self._metadata is None:
            try:
                self._metadata = self.admin.list_topics(timeout=self.remaining())
            except KafkaException as exc:
                raise self.error(exc) from None
        return self._metadata

    def topic_partitions(self, topics: Iterable[str] | None = None) -> dict[str, int]:
        """Partition counts, for every topic (None) or only for the named ones that exist."""
        counts = {name: len(topic.partitions) for name, topic in self.metadata().topics.items() if topic.error is None}
        if topics is None:
            return counts
        wanted = set(topics)
        return {name: count for name, count in counts.items() if name in wanted}

    def broker_ids(self) -> list[int]:
        """The node ids Metadata lists (a Castle broker lists each of its workers too)."""
        return sorted(self.metadata().brokers)


def _exception_text(exc: BaseException) -> str:
    if exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].str())
    return str(exc)

