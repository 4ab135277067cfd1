"""Build a kio response entity of any version from one plain description.

Handlers describe a response once, as nested dicts with every field any version has;
``build(ResponseClass, data)`` keeps the fields this version defines (others are
dropped: e.g. ``log_start_offset`` does not exist in Produce v4) and converts plain
values to kio's types (ints to ErrorCode and timedeltas, dicts to nested entities).
That keeps "if version >= N" out of the handlers (STYLE anti-pattern 1): the version's
schema decides which fields exist.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import typing
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta


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
    return None


def build(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for name, convert, required in _plan(cls):
        if name in data:
            value = data[name]
            kwargs[name] = convert(value) if convert is not None else value
        elif required:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__} needs field {name!r}")
    return cls(**kwargs)
