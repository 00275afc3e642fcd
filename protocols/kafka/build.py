"""Build a kio message of any version from plain values, so one builder serves every version.

kio has one class per message version (``kio.schema.metadata.v5.response.MetadataResponse``),
each with exactly that version's fields. ``build(cls, {...})`` keeps the keys the class has,
drops the rest (fields a version does not carry), fills the missing ones with the schema default
or the type's zero, and converts plain values to kio's types: milliseconds to ``timedelta``,
epoch milliseconds to ``datetime`` (-1 to null), ints to ``ErrorCode``, and nested mappings to
the nested entity classes. That is the "version-gated fields" rule of STYLE.md, applied by the
schema instead of by hand-written ``if version >= n`` branches.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from protocols._wire import LocalProtocolError

_Convert = Callable[[Any], Any]
_MISSING = dataclasses.MISSING
_UTC = datetime.UTC


def _identity(value: Any) -> Any:
    return value


def _ms_to_timedelta(value: Any) -> Any:
    return datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


def _ms_to_datetime(value: Any) -> Any:
    if isinstance(value, int):
        return None if value < 0 else datetime.datetime.fromtimestamp(value / 1000, _UTC)
    return value


def _error_code(value: Any) -> Any:
    return ErrorCode(value) if isinstance(value, int) else value


def _entity_of(tp: Any) -> type[Any] | None:
    return tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _field_plan(f: dataclasses.Field[Any]) -> tuple[_Convert, Any]:
    """How to convert a value for this field, and its zero when the caller gives none."""
    kafka_type = f.metadata.get("kafka_type")
    tp, nullable = _strip_optional(f.type)
    if typing.get_origin(tp) is tuple:
        inner = _entity_of(typing.get_args(tp)[0])
        zero: Any = None if nullable else ()
        if inner is not None:
            item = inner
            return (lambda v: v if v is None else tuple(_build_any(item, x) for x in v)), zero
        return (lambda v: v if v is None else tuple(v)), zero
    entity = _entity_of(tp)
    if entity is not None:
        nested = entity
        return (lambda v: _build_any(nested, v)), None
    if kafka_type == "timedelta_i32" or kafka_type == "timedelta_i64":
        return _ms_to_timedelta, datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return _ms_to_datetime, None
    if kafka_type == "error_code":
        return _error_code, ErrorCode.none
    if nullable:
        return _identity, None
    if kafka_type == "bool":
        return _identity, False
    if kafka_type in ("string", "uuid"):
        return _identity, ""
    if kafka_type == "bytes":
        return _identity, b""
    return _identity, 0


@cache
def _plan(cls: type[Any]) -> tuple[tuple[str, _Convert, Any], ...]:
    plan = []
    for f in dataclasses.fields(cls):
        convert, zero = _field_plan(f)
        if f.default is not _MISSING:
            zero = f.default
        elif f.default_factory is not _MISSING:
            zero = f.default_factory()
        plan.append((f.name, convert, zero))
    return tuple(plan)


def _build_any(cls: type[Any], value: Any) -> Any:
    return build(cls, value) if isinstance(value, Mapping) else value


def build(cls: type[Any], values: Mapping[str, Any]) -> Any:
    """An instance of the kio entity ``cls`` from ``values`` (see the module docstring)."""
    if not dataclasses.is_dataclass(cls):
        raise LocalProtocolError(f"{cls!r} is not a kio entity")
    kwargs = {}
    for name, convert, zero in _plan(cls):
        value = values.get(name, _MISSING)
        kwargs[name] = zero if value is _MISSING else convert(value)
    return cls(**kwargs)


__all__ = ["build"]
