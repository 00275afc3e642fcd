"""Build a kio message of any version from plain values, so one builder serves every version.

kio has one class per message version (``kio.schema.metadata.v5.response.MetadataResponse``),
each with exactly that version's fields. ``build(cls, {...})`` takes one dict written for every
version: it keeps the keys the class has, drops keys that only other versions of the message
have, leaves omitted fields with a schema default to kio, and converts plain values to kio's
types: milliseconds to ``timedelta``, epoch milliseconds to ``datetime`` (-1 to null), ints to
``ErrorCode``, and nested mappings to the nested entity classes. That is the "version-gated
fields" rule of STYLE.md, applied by the schema instead of by hand-written ``if version >= n``
branches. Like ``gateway/config.py`` it is strict: a key that no version of the message (or of
the nested entity) has, or an omitted required field, raises ``LocalProtocolError``, so a typo
never reaches a client as a zero (``error_code`` 0 is success).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import pkgutil
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocols._wire import LocalProtocolError

_Convert = Callable[[Any], Any]
_MISSING: Final = dataclasses.MISSING
_UTC = datetime.UTC


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


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _converter(f: dataclasses.Field[Any]) -> _Convert | None:
    """How to turn a plain value into kio's type for ``f``; None = it already is one."""
    kafka_type = f.metadata.get("kafka_type")
    tp = _strip_optional(f.type)
    if typing.get_origin(tp) is tuple:
        item = _entity_of(typing.get_args(tp)[0])
        if item is not None:
            return lambda v: v if v is None else tuple(_build_any(item, x) for x in v)
        return lambda v: v if v is None else tuple(v)
    entity = _entity_of(tp)
    if entity is not None:
        return lambda v: _build_any(entity, v)
    if kafka_type == "timedelta_i32" or kafka_type == "timedelta_i64":
        return _ms_to_timedelta
    if kafka_type == "datetime_i64":
        return _ms_to_datetime
    if kafka_type == "error_code":
        return _error_code
    return None


def _all_versions(cls: type[Any]) -> frozenset[str]:
    """Field names of ``cls`` in every version of its message: kio generates one module per
    version (``kio.schema.<message>.v<n>.<request|response>``) and names a nested entity the
    same in each (after the schema's struct name)."""
    package, _, rest = cls.__module__.rpartition(".v")
    version, _, leaf = rest.partition(".")
    names = {f.name for f in dataclasses.fields(cls)}
    if not package or not version.isdigit() or not leaf:
        return frozenset(names)
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name.startswith("v") and info.name[1:].isdigit():
            try:
                module = importlib.import_module(f"{package}.{info.name}.{leaf}")
            except ImportError:  # this version has no such entity type (e.g. only a request)
                continue
            other = getattr(module, cls.__name__, None)
            if other is not None and dataclasses.is_dataclass(other):
                names.update(f.name for f in dataclasses.fields(other))
    return frozenset(names)


class _Plan:
    """What ``build`` needs to know about one kio class, computed once per class: ``build`` is
    on the response hot path.

    Required means: the kio class gives the field no default. kio gives one where Kafka's JSON
    schema declares a ``default`` and to the tagged fields (optional on the wire) bar three nested
    structs. Nullable fields are no exception: a ``str | None`` without a schema default (most
    ``error_message`` fields) is passed, ``None`` included. A field that only other versions have
    is never required at this one.
    """

    __slots__ = ("cls", "everywhere", "fields", "label", "own")

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.label = f"{cls.__name__} v{getattr(cls, '__version__', '?')}"
        self.fields = tuple(
            (f.name, _converter(f), f.default is _MISSING and f.default_factory is _MISSING)
            for f in dataclasses.fields(cls)
        )
        self.own = frozenset(name for name, _, _ in self.fields)
        self.everywhere: frozenset[str] | None = None  # filled on the first foreign key

    def reject_unknown(self, values: Mapping[str, Any]) -> None:
        everywhere = self.everywhere
        if everywhere is None:
            everywhere = self.everywhere = _all_versions(self.cls)
        if not everywhere.issuperset(values):
            unknown = ", ".join(repr(k) for k in values if k not in everywhere)
            raise LocalProtocolError(f"{self.label}: no version has the field(s) {unknown}")

    def missing(self, values: Mapping[str, Any]) -> LocalProtocolError:
        names = [name for name, _, required in self.fields if required and name not in values]
        return LocalProtocolError(
            f"{self.label}: required field(s) not given: {', '.join(map(repr, names))}"
        )


_PLANS: dict[type[Any], _Plan] = {}


def _build_any(cls: type[Any], value: Any) -> Any:
    return build(cls, value) if isinstance(value, Mapping) else value


def build(cls: type[Any], values: Mapping[str, Any]) -> Any:
    """An instance of the kio entity ``cls`` from ``values`` (see the module docstring); raises
    ``LocalProtocolError`` on an unknown key or a missing required field."""
    plan = _PLANS.get(cls)
    if plan is None:
        if not dataclasses.is_dataclass(cls):
            raise LocalProtocolError(f"{cls!r} is not a kio entity")
        plan = _PLANS[cls] = _Plan(cls)
    if not plan.own.issuperset(values):
        plan.reject_unknown(values)
    kwargs = {}
    for name, convert, required in plan.fields:
        value = values.get(name, _MISSING)
        if value is not _MISSING:
            kwargs[name] = value if convert is None else convert(value)
        elif required:
            raise plan.missing(values)
    return cls(**kwargs)


__all__ = ["build"]
