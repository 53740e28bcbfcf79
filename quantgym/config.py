"""The frozen, versioned base of every task's configuration dataclasses.

Each task keeps its constants in its own ``config.py`` (``quantgym/envs/<task>/config.py``); every
config class there derives from :class:`Config`, so all of them share one behaviour:

- frozen (a subclass must be ``@dataclass(frozen=True)``; ``dataclasses`` refuses a non-frozen one);
- :meth:`Config.to_dict` -> the plain nested dict (``dataclasses.asdict``: what results files hold);
- :meth:`Config.from_dict` -> the config back from such a dict (nested configs rebuilt, JSON lists
  turned back into tuples where a field is a tuple), ``from_dict(c.to_dict()) == c``;
- :meth:`Config.replace` -> a copy with some fields changed;
- :attr:`Config.version` -> the version string of the rules the config belongs to: a class keyword
  (``class ArenaCostModel(Config, version=ARENA_VERSION)``), or a ``version`` field where the records carry
  it (its default is then the class attribute).

Standard library only: importing it loads no numpy.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

C = TypeVar("C", bound="Config")


@dataclass(frozen=True)
class Config:
    """Base of every task config: frozen, ``to_dict`` / ``from_dict`` / ``replace``, a ``version``."""

    #: version of the rules this config belongs to (e.g. ``"qa-v1"``): set by every subclass, either as a
    #: class keyword (``class ArenaCostModel(Config, version=ARENA_VERSION)``) or as a ``version`` field
    version: ClassVar[str] = ""

    def __init_subclass__(cls, version: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if version is not None:
            cls.version = version

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of every field (``dataclasses.asdict``; JSON-ready for JSON-typed fields)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[C], d: Mapping[str, Any]) -> C:
        """The config whose :meth:`to_dict` is ``d``; a missing key keeps the field's default.

        Nested configs are rebuilt from their dicts and lists become tuples where the field is a
        tuple (so a dict read back from JSON works too).

        Raises
        ------
        ValueError
            ``d`` holds a key that is not a field of ``cls`` (the message names it).
        TypeError
            ``d`` is not a mapping.
        """
        if not isinstance(d, Mapping):
            raise TypeError(f"{cls.__name__}.from_dict expects a mapping, got {type(d).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        for key in d:
            if key not in fields:
                raise ValueError(f"{cls.__name__}.from_dict: unknown key {key!r} (fields: {', '.join(fields)})")
        hints = typing.get_type_hints(cls)
        return cls(**{k: _coerce(hints.get(k, Any), v) for k, v in d.items()})

    def replace(self: C, **changes: Any) -> C:
        """A copy with ``changes`` applied (``dataclasses.replace``; an unknown name raises ``TypeError``)."""
        return dataclasses.replace(self, **changes)


def _coerce(hint: Any, value: Any) -> Any:
    """``value`` read as a field of type ``hint``: dict -> nested Config, list -> tuple (recursively)."""
    if isinstance(hint, type) and issubclass(hint, Config):
        return hint.from_dict(value) if isinstance(value, Mapping) else value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        first: Exception | None = None  # e.g. ``ArenaCostModel | ImportableModel``: the first that takes the dict
        for arg in typing.get_args(hint):
            if arg is not type(None):
                try:
                    out = _coerce(arg, value)
                except (TypeError, ValueError) as e:
                    first = first or e
                    continue
                if out is not value:
                    return out
        if first is not None:
            raise first
        return value
    if origin is tuple and isinstance(value, (list, tuple)):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], v) for v in value)
        if args and len(args) == len(value):
            return tuple(_coerce(a, v) for a, v in zip(args, value))
        return tuple(value)
    return value


__all__ = ["Config"]
