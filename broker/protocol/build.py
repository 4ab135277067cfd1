"""Build a kio response entity of any version from one plain description.

Handlers describe a response once, as nested dicts with every field any version has;
``build(ResponseClass, data)`` keeps the fields this version defines (others are
dropped: e.g. ``log_start_offset`` does not exist in Produce v4) and converts plain
values to kio's types (ints to ErrorCode and timedeltas, dicts to nested entities).
That keeps "if version >= N" out of the handlers (STYLE anti-pattern 1): the version's
schema decides which fields exist.

Only a field of some version may be dropped. A key that no version of that entity has
(the message itself, or a nested struct of that name: a nested entry's field at the top
level does not count) is a misspelling or a dead field, and is refused with a TypeError
naming it rather than vanishing from the response unnoticed. The set of every version's
fields is computed once per entity, and only when a description carries keys its version
lacks, so a description that fits its version costs one length comparison more.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import re
import typing
from typing import Any, NoReturn

from kio.schema.errors import ErrorCode
from kio.schema.index import schema_name_map
from kio.static.primitive import TZAware, i32Timedelta, i64Timedelta

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _instant(value: Any) -> Any:
    """Milliseconds since the epoch as kio's datetime; -1 (Kafka's "none") too, which kio
    writes back as -1 (it cannot read it: a reader of such a field decodes it by hand)."""
    return value if isinstance(value, datetime.datetime) else EPOCH + datetime.timedelta(milliseconds=value)


@functools.cache
def _plan(cls: type) -> list[tuple[str, Any, bool]]:
    """(field name, converter, required) for each init field of ``cls``."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, _converter(hints[f.name]), required))
    return plan


def _converter(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple and args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
        inner: type = args[0]
        return lambda value: tuple(build(inner, v) if isinstance(v, dict) else v for v in value)
    if origin is tuple:
        return tuple
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        real = [a for a in args if a is not type(None)]
        if len(real) == 1:
            inner_convert = _converter(real[0])
            if inner_convert is None:
                return None
            return lambda value: None if value is None else inner_convert(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        entity_class: type = hint
        return lambda value: build(entity_class, value) if isinstance(value, dict) else value
    if hint is ErrorCode:
        return ErrorCode
    if hint in (i32Timedelta, i64Timedelta):
        return lambda value: value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
    if hint is TZAware:
        return _instant
    return None


# kio generates one module per message, version and kind: kio.schema.<message>.v<N>.<kind>
_VERSIONED_MODULE = re.compile(r"kio\.schema\.(\w+)\.v\d+\.(\w+)")


def _init_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.init}


@functools.cache
def _fields_of_any_version(message: str, kind: str, entity: str) -> frozenset[str]:
    """The field names the entity so named has in any version of the message.

    Imports every version's module (tens of milliseconds for a message with many
    versions), so it runs once per entity name, and only when a description carries
    keys its version lacks: descriptions that fit their version never pay it.
    """
    names: set[str] = set()
    for version in schema_name_map.get(message, {}):
        try:
            module = importlib.import_module(f"kio.schema.{message}.v{version}.{kind}")
        except ModuleNotFoundError:  # this kind (e.g. a request) does not exist in that version
            continue
        other = getattr(module, entity, None)
        if isinstance(other, type) and dataclasses.is_dataclass(other):
            names |= _init_fields(other)
    return frozenset(names)


# Per class, the same sets: a plain dict lookup is the cheapest test build() can make.
_KNOWN: dict[type, frozenset[str]] = {}


def _known_fields(cls: type) -> frozenset[str]:
    found = _VERSIONED_MODULE.fullmatch(cls.__module__)
    own = frozenset(_init_fields(cls))
    known = own | _fields_of_any_version(*found.groups(), cls.__qualname__) if found else own
    _KNOWN[cls] = known
    return known


def _known(cls: type) -> frozenset[str]:
    known = _KNOWN.get(cls)
    return _known_fields(cls) if known is None else known


def _unknown_keys(cls: type, data: dict[str, Any]) -> list[str]:
    return sorted(data.keys() - _known(cls))


def _refuse(cls: type, data: dict[str, Any], missing: str | None = None) -> NoReturn:
    version = getattr(cls, "__version__", None)
    problems = []
    unknown = _unknown_keys(cls, data)
    if unknown:
        problems.append(f"no version of the message has field(s) {', '.join(map(repr, unknown))} "
                        "(misspelt, or a field Kafka does not have)")
    if missing is not None:
        problems.append(f"needs field {missing!r}")
    where = f" v{version}" if version is not None else ""
    raise TypeError(f"{cls.__module__}.{cls.__qualname__}{where}: {'; '.join(problems)}")


def build(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for name, convert, required in _plan(cls):
        if name in data:
            value = data[name]
            kwargs[name] = convert(value) if convert is not None else value
        elif required:
            _refuse(cls, data, missing=name)
    if len(kwargs) != len(data):
        # Keys this version lacks are dropped only if another version has them. A
        # description that fits its version exactly (the newest clients) skips this test.
        if not _known(cls).issuperset(data):
            _refuse(cls, data)
    return cls(**kwargs)
