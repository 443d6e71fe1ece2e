"""Cache entries as data-only JSON: reading one can build our own plain data and nothing else.

Every JSON object is a tag: ``{"d": [keys, values]}`` a dict with string keys,
``{"m": [[k, v], ...]}`` any other dict, ``{"t": [...]}`` a tuple, ``{"s": [...]}`` a set,
``{"f": [...]}`` a frozenset, ``{"p": "..."}`` a path, ``{"e": "module:Name", "v": value}``
an enum member, ``{"c": "module:Name", "v": [field values]}`` a dataclass, ``{"r": n}`` the
n-th dict or dataclass completed before it (numbered innermost first, as JSON's parser
completes them): an object held in several places, such as the bindings dict that a module's
facts share between platforms, is written once and read back shared, as it was. JSON's
parser hands each object to ``_tag`` as it completes, innermost first (no second walk).

A class is only looked up among the dataclasses and enums of mtp_audit modules already
imported: nothing is imported, and no constructor or ``__post_init__`` runs (fields are set
as pickle would set them). Each field's value is then checked against the field's annotation
(``_checker``: str, int but not bool, finite float, enums, paths, lists, tuples, dicts and
sets of those, unions and ``Optional``, literals, other dataclasses), recursively, so a hostile
or stale file can at worst describe wrong values of the right types, which the key written
into every entry then rejects; a value of another type makes the whole entry unreadable.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path, PurePath

_SCALARS = (str, int, float, bool, type(None))
_PACKAGE = __name__.split(".", 1)[0] + "."


class UnreadableEntry(ValueError):
    """Bytes that are not an entry this codec wrote."""


Check = Callable[[object], bool]  # whether a decoded value fits a field's annotation

_NAMES: dict[type, str] = {}
_FIELDS: dict[type, tuple[str, ...]] = {}
_CHECKS: dict[type, tuple[Check, ...]] = {}
_CLASSES: dict[str, tuple[type, tuple[str, ...] | None]] = {}  # name -> (class, field names; None: an enum)


def _name(cls: type) -> str:
    name = _NAMES.get(cls)
    if name is None:
        name = _NAMES[cls] = f"{cls.__module__}:{cls.__qualname__}"
    return name


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _is_int(value: object) -> bool:
    return type(value) is int


def _is_float(value: object) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _each(outer: type, inner: Check) -> Check:
    return lambda value: type(value) is outer and all(inner(item) for item in value)


def _mapping(key: Check, item: Check) -> Check:
    return lambda value: type(value) is dict and all(key(k) and item(v) for k, v in value.items())


def _fixed_tuple(items: tuple[Check, ...]) -> Check:
    return lambda value: (
        type(value) is tuple and len(value) == len(items) and all(check(v) for check, v in zip(items, value))
    )


def _any_of(options: tuple[Check, ...]) -> Check:
    return lambda value: any(check(value) for check in options)


def _literal(choices: tuple) -> Check:
    return lambda value: any(type(value) is type(choice) and value == choice for choice in choices)


def _instance(cls: type) -> Check:
    return lambda value: isinstance(value, cls)


_SIMPLE: dict[object, Check] = {
    typing.Any: lambda value: True,
    object: lambda value: True,
    type(None): lambda value: value is None,
    bool: lambda value: type(value) is bool,
    int: _is_int,
    float: _is_float,
    str: _instance(str),
}
_CONTAINERS = (list, tuple, dict, set, frozenset)


def _checker(hint: object) -> Check:
    """Whether a decoded value is of the annotated type ``hint``; TypeError for a type the cache
    cannot hold. Dataclass values are already checked where they were built, so an ``isinstance``
    is enough for them."""
    if hint in _SIMPLE:
        return _SIMPLE[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return _any_of(tuple(map(_checker, args)))
    if origin is typing.Literal:
        return _literal(args)
    if origin in (list, set, frozenset):
        return _each(origin, _checker(args[0]))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _each(tuple, _checker(args[0]))
        return _fixed_tuple(tuple(map(_checker, args)))
    if origin is dict:
        return _mapping(_checker(args[0]), _checker(args[1]))
    if hint in _CONTAINERS:
        return lambda value: type(value) is hint
    if origin is None and isinstance(hint, type) and not issubclass(hint, _CONTAINERS):
        return _instance(hint)  # an enum, a path, another dataclass
    raise TypeError(f"cannot keep a {hint} in the cache")


def _field_checks(cls: type) -> tuple[Check, ...]:
    """One check per field of the dataclass ``cls``, from its annotations (resolved once)."""
    checks = _CHECKS.get(cls)
    if checks is None:
        try:
            hints = typing.get_type_hints(cls)
        except NameError as error:
            raise TypeError(f"cannot keep a {cls.__qualname__} in the cache: {error}") from None
        checks = _CHECKS[cls] = tuple(_checker(hints[name]) for name in _field_names(cls))
    return checks


class _Encoder:
    """One ``dumps``: numbers each dict and dataclass as it completes, and writes a reference
    for one met again (the same object, not an equal one)."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}

    def shared(self, value: object) -> dict | None:
        number = self.numbers.get(id(value))
        return None if number is None else {"r": number}

    def done(self, value: object, encoded: dict) -> dict:
        self.numbers[id(value)] = len(self.numbers)
        return encoded

    def encode(self, value: object) -> object:
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is list:
            return [v if type(v) is str else self.encode(v) for v in value]
        if kind is dict:
            reference = self.shared(value)
            if reference is not None:
                return reference
            if all(type(k) is str for k in value):
                body = {"d": [list(value), [v if type(v) is str else self.encode(v) for v in value.values()]]}
            else:
                body = {"m": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
            return self.done(value, body)
        if kind is tuple:
            return {"t": [v if type(v) is str else self.encode(v) for v in value]}
        if kind in (set, frozenset):
            return {"s" if kind is set else "f": [self.encode(v) for v in sorted(value, key=repr)]}
        if isinstance(value, enum.Enum):
            return {"e": _name(kind), "v": value.value}
        if isinstance(value, PurePath):
            return {"p": str(value)}
        if dataclasses.is_dataclass(value):
            reference = self.shared(value)
            if reference is not None:
                return reference
            _field_checks(kind)  # a field type the reader could not check fails here, where tests see it
            items = [getattr(value, name) for name in _field_names(kind)]
            body = {"c": _name(kind), "v": [v if type(v) is str else self.encode(v) for v in items]}
            return self.done(value, body)
        raise TypeError(f"cannot keep a {kind.__name__} in the cache")


def dumps(value: object) -> bytes:
    return json.dumps(_Encoder().encode(value), separators=(",", ":"), ensure_ascii=False).encode()


def _class(name: object) -> tuple[type, tuple[str, ...] | None]:
    """One of our own dataclasses or enums, by name, from modules already imported; its fields."""
    if type(name) is str and name in _CLASSES:
        return _CLASSES[name]
    if not isinstance(name, str) or ":" not in name:
        raise UnreadableEntry(f"bad class reference {name!r}")
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name) if module_name.startswith(_PACKAGE) else None
    cls: object = module
    for part in qualname.split(".") if module is not None else ():
        cls = getattr(cls, part, None)
    if not isinstance(cls, type) or cls.__module__ != module_name or f"{module_name}:{cls.__qualname__}" != name:
        raise UnreadableEntry(f"{name} is not data this tool keeps")
    if issubclass(cls, enum.Enum):
        found: tuple[type, tuple[str, ...] | None] = (cls, None)
    elif dataclasses.is_dataclass(cls):
        found = (cls, _field_names(cls))
    else:
        raise UnreadableEntry(f"{name} is not data this tool keeps")
    _CLASSES[name] = found
    return found


def _tag(value: dict, completed: list) -> object:
    """The value one JSON object stands for; ``completed``: the dicts and dataclasses read so far."""
    if len(value) == 1:
        ((tag, body),) = value.items()
        if tag == "r" and type(body) is int and 0 <= body < len(completed):
            return completed[body]
        if (
            tag == "d"
            and type(body) is list
            and len(body) == 2
            and type(body[0]) is list
            and type(body[1]) is list
            and len(body[0]) == len(body[1])
        ):
            return _completed(completed, dict(zip(body[0], body[1])))
        if tag == "t" and type(body) is list:
            return tuple(body)
        if tag == "m" and type(body) is list and all(type(i) is list and len(i) == 2 for i in body):
            return _completed(completed, dict(body))
        if tag == "s" and type(body) is list:
            return set(body)
        if tag == "f" and type(body) is list:
            return frozenset(body)
        if tag == "p" and type(body) is str:
            return Path(body)
    elif len(value) == 2 and "v" in value:
        if "c" in value and type(value["v"]) is list:
            cls, names = _class(value["c"])
            if names is None or len(names) != len(value["v"]):
                raise UnreadableEntry(f"{value['c']} has another layout")
            obj = object.__new__(cls)
            for name, check, item in zip(names, _field_checks(cls), value["v"]):
                if not check(item):
                    raise UnreadableEntry(
                        f"{value['c']}.{name} holds a {type(item).__name__}, not what its annotation says"
                    )
                object.__setattr__(obj, name, item)
            return _completed(completed, obj)
        if "e" in value:
            cls, names = _class(value["e"])
            if names is not None:
                raise UnreadableEntry(f"{value['e']} is not an enum")
            return cls(value["v"])
    raise UnreadableEntry(f"unknown object {str(value)[:60]}")


def _completed(completed: list, value: object) -> object:
    completed.append(value)
    return value


def loads(data: bytes) -> object:
    """The value ``dumps`` wrote; UnreadableEntry for anything else."""
    try:
        completed: list = []
        return json.loads(data, object_hook=lambda value: _tag(value, completed))
    except UnreadableEntry:
        raise
    except (ValueError, TypeError, RecursionError) as error:  # torn, garbage, unhashable keys, too deep
        raise UnreadableEntry(f"{type(error).__name__}: {str(error)[:80]}") from None
