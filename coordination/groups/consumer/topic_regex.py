"""Subscriptions by regular expression (KIP-848): RE2 syntax, matched against whole topic
names, as Kafka's coordinator does with RE2J (``Pattern.matcher(topic).matches()``).

RE2 rather than Python's ``re``: the coordinator runs patterns clients send, and RE2 runs in
time linear in the name whatever the pattern, and takes exactly the syntax Kafka accepts (no
backreferences, no lookaround), so a pattern Kafka refuses is refused here too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import re2

# The broker's own topics are never matched, as Kafka leaves internal topics out.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered; not the broker's log


class InvalidRegularExpression(ValueError):
    """Kafka's INVALID_REGULAR_EXPRESSION."""


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> re2._Regexp:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegularExpression(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
                                       f"{detail}.") from None


def matching_topics(pattern: str, topics: Iterable[str]) -> frozenset[str]:
    compiled = compile_topic_regex(pattern)
    return frozenset(t for t in topics if t not in INTERNAL_TOPICS and compiled.fullmatch(t) is not None)
