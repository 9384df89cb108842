"""A task's arguments and result, checked against its function's signature and
annotations, and turned into plain data for a codec (and back).

:class:`Arguments` is made once per task, from the function: every parameter's
annotation becomes a converter (:func:`converter`) that checks a value and turns it
into plain data (None, bool, int, float, str, bytes, lists, dicts with str keys) on
the way in, and turns plain data back into the annotated type on the way out.  What
it takes:

* ``None``, ``bool``, ``int`` (not a bool), ``float`` (an int too), ``str``, ``bytes``;
* ``list[T]``, ``tuple[T, ...]``, ``tuple[A, B]``, ``set[T]``, ``frozenset[T]``,
  ``dict[str, T]`` (and their ``typing`` spellings, ``Sequence``, ``Mapping``);
* ``Optional[T]``, ``Union[A, B]`` (the first that takes the value), ``Literal[...]``;
* an ``enum.Enum`` (stored as its value), ``datetime``, ``date``, ``time`` (ISO 8601,
  the time zone kept), ``timedelta`` (seconds), ``uuid.UUID``, ``decimal.Decimal``
  (as text);
* a dataclass (its fields, each by its own annotation);
* a pydantic model (``model_dump(mode="json")``, ``model_validate``), when pydantic
  is installed;
* ``Any``, or no annotation: plain data as it is.

Anything else is refused when the task is made (TypeError naming the parameter), a
value of the wrong type when it is deferred (TypeError or ValueError naming the
argument), before anything is written.  Pure computation: no FoundationDB.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import inspect
import sys
import typing
import uuid
from typing import Any, Callable, Dict, List, NamedTuple, Tuple, cast

__all__ = ["Arguments", "Converter", "converter", "plain_of"]

_NONE = type(None)
_UNION_TYPES: Tuple[Any, ...] = (typing.Union,)
if sys.version_info >= (3, 10):  # X | Y
    import types

    _UNION_TYPES = (typing.Union, types.UnionType)


class Converter(NamedTuple):
    """How values of one annotation are checked and made plain (``dump(value,
    name)``), and made again from plain data (``load(plain, name)``); ``name`` is what
    an error names."""

    dump: Callable[[Any, str], Any]
    load: Callable[[Any, str], Any]
    text: str


def _a(kind: Any) -> str:
    """A type's name with its article, as errors say it: "a Shape", "an Order"."""
    name: str = kind.__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _wrong(name: str, text: str, value: Any) -> TypeError:
    return TypeError(f"{name} must be {text}, not {type(value).__name__}")


def _exact(kinds: Tuple[type, ...], text: str) -> Converter:
    """bool, str, bytes: the value as it is, of exactly one of ``kinds``."""
    def dump(value: Any, name: str) -> Any:
        if type(value) not in kinds:
            raise _wrong(name, text, value)
        return value
    return Converter(dump, dump, text)


def _int(value: Any, name: str) -> int:
    if type(value) is not int and not (isinstance(value, int) and not isinstance(value, bool)):
        raise _wrong(name, "an int", value)
    return int(value)


def _float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong(name, "a float", value)
    return float(value)


def _none(value: Any, name: str) -> None:
    if value is not None:
        raise _wrong(name, "None", value)


def _any(value: Any, name: str) -> Any:
    return value


def _iso(kind: type, text: str) -> Converter:
    """datetime, date, time: ISO 8601 text."""
    def dump(value: Any, name: str) -> Any:
        if type(value) is not kind:
            raise _wrong(name, text, value)
        return cast(Any, value).isoformat()

    def load(plain: Any, name: str) -> Any:
        if type(plain) is not str:
            raise _wrong(name, f"{text} (ISO 8601 text)", plain)
        return kind.fromisoformat(plain)  # type: ignore[attr-defined]
    return Converter(dump, load, text)


def _timedelta() -> Converter:
    def dump(value: Any, name: str) -> Any:
        if type(value) is not datetime.timedelta:
            raise _wrong(name, "a timedelta", value)
        return value.total_seconds()

    def load(plain: Any, name: str) -> Any:
        return datetime.timedelta(seconds=_float(plain, name))
    return Converter(dump, load, "a timedelta")


def _textual(kind: type, text: str) -> Converter:
    """UUID, Decimal: their text."""
    def dump(value: Any, name: str) -> Any:
        if not isinstance(value, kind):
            raise _wrong(name, text, value)
        return str(value)

    def load(plain: Any, name: str) -> Any:
        if type(plain) is not str:
            raise _wrong(name, text, plain)
        return kind(plain)
    return Converter(dump, load, text)


def _instance_of(kind: Any, text: str) -> Callable[[Any, str], Any]:
    """A converter's dump for instances of ``kind`` (an enum, a pydantic model): their
    plain form (:func:`plain_of`)."""
    def dump(value: Any, name: str) -> Any:
        if not isinstance(value, kind):
            raise _wrong(name, text, value)
        return plain_of(value)
    return dump


def _enum(kind: Any) -> Converter:
    text = _a(kind)
    dump = _instance_of(kind, text)

    def load(plain: Any, name: str) -> Any:
        try:
            return kind(plain)
        except ValueError:
            raise ValueError(f"{name}: {plain!r} is not a value of {kind.__name__}") from None
    return Converter(dump, load, text)


def _sequence(origin: Any, args: Tuple[Any, ...]) -> Converter:
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        parts = [converter(a) for a in args]
        if args == ((),):  # Tuple[()]
            parts = []
        text = f"a tuple of {len(parts)}"

        def dump_fixed(value: Any, name: str) -> Any:
            if not isinstance(value, tuple) or len(value) != len(parts):
                raise _wrong(name, text, value)
            return [p.dump(v, f"{name}[{i}]") for i, (p, v) in enumerate(zip(parts, value))]

        def load_fixed(plain: Any, name: str) -> Any:
            if not isinstance(plain, list) or len(plain) != len(parts):
                raise _wrong(name, text, plain)
            return tuple(p.load(v, f"{name}[{i}]") for i, (p, v) in enumerate(zip(parts, plain)))
        return Converter(dump_fixed, load_fixed, text)
    each = converter(args[0]) if args else converter(Any)
    made = {list: list, tuple: tuple, set: set, frozenset: frozenset}.get(origin, list)
    accepted: Tuple[type, ...] = (list, tuple) if made in (list, tuple) else (set, frozenset)
    if origin not in (list, tuple, set, frozenset):  # Sequence, Iterable...
        accepted = (list, tuple)
    text = _a(made)

    def dump(value: Any, name: str) -> Any:
        if not isinstance(value, accepted):
            raise _wrong(name, text, value)
        return [each.dump(v, f"{name}[{i}]") for i, v in enumerate(cast(Any, value))]

    def load(plain: Any, name: str) -> Any:
        if not isinstance(plain, list):
            raise _wrong(name, text, plain)
        return made(each.load(v, f"{name}[{i}]") for i, v in enumerate(plain))
    return Converter(dump, load, text)


def _mapping(args: Tuple[Any, ...]) -> Converter:
    if args and args[0] not in (str, Any):
        raise TypeError(f"dict keys must be str (plain data keeps str keys), not {args[0]!r}")
    each = converter(args[1]) if len(args) == 2 else converter(Any)

    def dump(value: Any, name: str) -> Any:
        if not isinstance(value, dict):
            raise _wrong(name, "a dict", value)
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise TypeError(f"{name}: keys must be str, not {type(k).__name__}")
            out[k] = each.dump(v, f"{name}[{k!r}]")
        return out

    def load(plain: Any, name: str) -> Any:
        if not isinstance(plain, dict):
            raise _wrong(name, "a dict", plain)
        return {k: each.load(v, f"{name}[{k!r}]") for k, v in plain.items()}
    return Converter(dump, load, "a dict")


def _union(args: Tuple[Any, ...]) -> Converter:
    options = [converter(a) for a in args]
    text = " or ".join(o.text for o in options)

    def attempt(side: int, value: Any, name: str) -> Any:
        errors = []
        for option in options:
            try:
                return (option.dump if side == 0 else option.load)(value, name)
            except (TypeError, ValueError) as e:
                errors.append(e)
        if len(errors) == 1 or all(isinstance(e, TypeError) for e in errors):
            raise _wrong(name, text, value)
        raise ValueError(f"{name}: " + "; ".join(map(str, errors)))
    return Converter(lambda v, n: attempt(0, v, n), lambda p, n: attempt(1, p, n), text)


def _literal(args: Tuple[Any, ...]) -> Converter:
    text = "one of " + ", ".join(map(repr, args))

    def dump(value: Any, name: str) -> Any:
        if not any(type(value) is type(a) and value == a for a in args):
            raise ValueError(f"{name} must be {text}, got {value!r}")
        return plain_of(value) if isinstance(value, enum.Enum) else value
    return Converter(dump, lambda p, n: dump(p, n), text)


def _dataclass(kind: Any) -> Converter:
    hints = typing.get_type_hints(kind)
    fields = [(f.name, converter(hints.get(f.name, Any))) for f in dataclasses.fields(kind)
              if f.init]
    text = _a(kind)

    def dump(value: Any, name: str) -> Any:
        if type(value) is not kind:
            raise _wrong(name, text, value)
        return {f: c.dump(getattr(value, f), f"{name}.{f}") for f, c in fields}

    def load(plain: Any, name: str) -> Any:
        if not isinstance(plain, dict):
            raise _wrong(name, text, plain)
        return kind(**{f: c.load(plain[f], f"{name}.{f}") for f, c in fields if f in plain})
    return Converter(dump, load, text)


def _pydantic(kind: Any) -> Converter:
    text = _a(kind)
    dump = _instance_of(kind, text)

    def load(plain: Any, name: str) -> Any:
        try:
            return kind.model_validate(plain)
        except Exception as e:  # pydantic's ValidationError
            raise ValueError(f"{name}: {e}") from None
    return Converter(dump, load, text)


def _is_pydantic(kind: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(kind, type) and issubclass(kind, pydantic.BaseModel)


_SIMPLE: Dict[Any, Converter] = {
    bool: _exact((bool,), "a bool"),
    str: _exact((str,), "a str"),
    bytes: _exact((bytes,), "bytes"),
    int: Converter(_int, _int, "an int"),
    float: Converter(_float, _float, "a float"),
    None: Converter(_none, _none, "None"),
    _NONE: Converter(_none, _none, "None"),
    Any: Converter(_any, _any, "anything"),
    inspect.Parameter.empty: Converter(_any, _any, "anything"),
    datetime.datetime: _iso(datetime.datetime, "a datetime"),
    datetime.date: _iso(datetime.date, "a date"),
    datetime.time: _iso(datetime.time, "a time"),
    datetime.timedelta: _timedelta(),
    uuid.UUID: _textual(uuid.UUID, "a UUID"),
    decimal.Decimal: _textual(decimal.Decimal, "a Decimal"),
}
_SEQUENCES = {list, tuple, set, frozenset, typing.Sequence, typing.MutableSequence,
              typing.Iterable, typing.Collection, typing.AbstractSet}
_MAPPINGS = {dict, typing.Mapping, typing.MutableMapping}


def converter(annotation: Any) -> Converter:
    """The converter of ``annotation`` (see the module docstring).

    Raises:
        TypeError: a type it cannot keep.
    """
    simple = _SIMPLE.get(annotation) if _hashable(annotation) else None
    if simple is not None:
        return simple
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    import collections.abc as abc
    if origin in _UNION_TYPES:
        return _union(args)
    if origin is typing.Literal:
        return _literal(args)
    if origin in _SEQUENCES or origin in (abc.Sequence, abc.MutableSequence, abc.Iterable,
                                          abc.Collection, abc.Set):
        return _sequence(origin, args)
    if origin in _MAPPINGS or origin in (abc.Mapping, abc.MutableMapping):
        return _mapping(args)
    if annotation in _SEQUENCES:
        return _sequence(annotation, ())
    if annotation in _MAPPINGS:
        return _mapping(())
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _enum(annotation)
        if dataclasses.is_dataclass(annotation):
            return _dataclass(annotation)
        if _is_pydantic(annotation):
            return _pydantic(annotation)
    raise TypeError(f"{annotation!r} is not a type a task keeps (see "
                    "fdbrecipes.tasks.arguments)")


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def plain_of(value: Any) -> Any:
    """Plain data for ``value`` of a type a codec does not know (a codec's fallback,
    without annotations: one way): an enum's value, a dataclass's fields, ISO 8601
    text of a datetime, a UUID's or Decimal's text, a timedelta's seconds, a set's
    list, a pydantic model's ``model_dump(mode="json")``.

    Raises:
        TypeError: none of these.
    """
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    if _is_pydantic(type(value)):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not plain data")


class Arguments:
    """A function's parameters and result, as a task checks and keeps them.

    Args:
        function: the task's function (sync or ``async def``).
        label: how errors name the task.

    Raises:
        TypeError: a parameter's (or the result's) annotation is not a type a task
            keeps, naming it.
    """

    def __init__(self, function: Callable[..., Any], label: str) -> None:
        self.label = label
        self.signature = inspect.signature(function)
        try:
            hints = typing.get_type_hints(function)
        except Exception as e:
            raise TypeError(f"{label}: its annotations cannot be resolved: {e}") from None
        self.params: Dict[str, Converter] = {}
        self.kinds: Dict[str, Any] = {}
        for name, param in self.signature.parameters.items():
            annotation = hints.get(name, param.annotation)
            try:
                self.params[name] = converter(annotation)
            except TypeError as e:
                raise TypeError(f"{label}: parameter {name!r}: {e}") from None
            self.kinds[name] = param.kind
        try:
            self.result = converter(hints.get("return", Any))
        except TypeError as e:
            raise TypeError(f"{label}: its return annotation: {e}") from None

    def dump(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """The arguments of a call as plain data (by parameter name), checked.

        Raises:
            TypeError or ValueError: an argument is missing, unknown or of the wrong
                type (the message names the task and the argument).
        """
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.label}: {e}") from None
        out: Dict[str, Any] = {}
        for name, value in bound.arguments.items():
            each = self.params[name]
            kind = self.kinds[name]
            label = f"{self.label}: argument {name!r}"
            if kind is inspect.Parameter.VAR_POSITIONAL:
                out[name] = [each.dump(v, f"{label}[{i}]") for i, v in enumerate(value)]
            elif kind is inspect.Parameter.VAR_KEYWORD:
                out[name] = {k: each.dump(v, f"{self.label}: argument {k!r}")
                             for k, v in value.items()}
            else:
                out[name] = each.dump(value, label)
        return out

    def load(self, plain: Any) -> Tuple[List[Any], Dict[str, Any]]:
        """The positional and keyword arguments to call the function with, from what
        :meth:`dump` made.

        Raises:
            TypeError or ValueError: ``plain`` does not fit the signature (naming the
                argument).
        """
        if not isinstance(plain, dict):
            raise TypeError(f"{self.label}: the arguments are not a mapping")
        unknown = set(plain) - set(self.params)
        if unknown:
            raise TypeError(f"{self.label}: no parameter {sorted(unknown)[0]!r}")
        by_position = any(k is inspect.Parameter.VAR_POSITIONAL for k in self.kinds.values())
        args: List[Any] = []
        kwargs: Dict[str, Any] = {}
        for name, kind in self.kinds.items():
            if name not in plain:
                continue
            value, each = plain[name], self.params[name]
            label = f"{self.label}: argument {name!r}"
            if kind is inspect.Parameter.VAR_POSITIONAL:
                args.extend(each.load(v, f"{label}[{i}]") for i, v in enumerate(value))
            elif kind is inspect.Parameter.VAR_KEYWORD:
                kwargs.update({k: each.load(v, label) for k, v in value.items()})
            elif kind is inspect.Parameter.POSITIONAL_ONLY or (
                    by_position and kind is inspect.Parameter.POSITIONAL_OR_KEYWORD):
                args.append(each.load(value, label))
            else:
                kwargs[name] = each.load(value, label)
        return args, kwargs

    def dump_result(self, value: Any) -> Any:
        """The function's result as plain data, checked against its annotation."""
        return self.result.dump(value, f"{self.label}: its result")

    def load_result(self, plain: Any) -> Any:
        """The result :meth:`dump_result` made plain, in its annotated type."""
        return self.result.load(plain, f"{self.label}: its result")
