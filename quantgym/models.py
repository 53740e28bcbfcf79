"""Swappable simulation models: a protocol per model kind and a config that names the class to build.

A task's config holds its fee and impact (fill) models as config objects. A built-in model is the task's
own dataclass (:data:`BUILTIN_MODELS`: ``ArenaCostModel``, ``ImpactModel``, ``PortBenchCostModel``) and runs
in the task's compiled kernels. Any other model is an :class:`ImportableModel`: the import path of a class
(``"package.module:Class"``) and the keyword arguments to build it with, the idea of nautilus_trader's
``ImportableFeeModelConfig`` (https://nautilustrader.io/docs/latest/api_reference/config). The class is
imported and built when the simulation starts, and the config's ``to_dict()`` (written into every
result) holds ``class_path`` and ``kwargs``, so a result names the model that produced it.

A fee model implements :class:`FeeModel`: ``order_fee(value, side, day)`` gives the fee of one order in
the task's currency, and ``describe()`` one line of rule text for the agent's prompt; an impact model
implements :class:`MarketImpactModel` (``fill(...)``, ``describe()``). A user model runs
in the interpreted form of the task's loop (slower, the same arithmetic otherwise); see
docs/quant_arena.md and docs/portbench.md, "Your own cost model".

Standard library only: importing it loads no numpy.
"""

from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from quantgym.config import Config

__all__ = ["FeeModel", "MarketImpactModel", "ImportableModel", "FlatFee", "load_model", "build_model",
           "describe_model", "fee_parts", "impact_fill", "BUILTIN_MODELS"]


@runtime_checkable
class FeeModel(Protocol):
    """What a fee model implements (Quant-Arena's and PortBench's ``cost`` / ``costs`` field).

    ``order_fee(value, side, day)``: the fee of one order, in the task's currency (CNY in Quant-Arena,
    the NAV's currency units in PortBench), charged to cash on top of the traded value.

    - ``value``: traded value of the order (shares × fill prices; PortBench: ``|Δw|·NAV``), > 0.
    - ``side``: +1 buy, −1 sell.
    - ``day``: execution day, ISO ``YYYY-MM-DD``.

    It may return one float, or Quant-Arena's breakdown ``(commission, transfer, stamp)``; the total is
    what is charged. ``describe()``: one line for the agent's prompt (e.g. ``"7 CNY per order"``);
    a model without it is described by its class path and arguments (:func:`describe_model`).
    """

    def order_fee(self, value: float, side: int, day: str) -> Any: ...

    def describe(self) -> str: ...


@runtime_checkable
class MarketImpactModel(Protocol):
    """What an impact (fill) model implements (Quant-Arena's ``impact`` field; replaces the Quant-Arena §10.8 book).

    ``fill(side, qty, price, sigma, adv, limit, day)`` -> ``(filled, value)``: the shares of an order of
    ``qty`` shares that fill (``0 <= filled <= qty``; the rest is dropped) and their value in CNY (the
    impact is ``value − filled·price`` for a buy, ``filled·price − value`` for a sell).

    - ``side``: +1 buy, −1 sell; ``price``: the raw open of the execution day (the reference price).
    - ``sigma``, ``adv``: the order's daily log-return volatility and average daily volume (shares) up to
      the decision date, as Quant-Arena §10.8 computes them for the simulated book.
    - ``limit``: the day's up-limit (buy) or down-limit (sell) in CNY, NaN for none.
    - ``day``: execution day, ISO ``YYYY-MM-DD``.

    A buy asks for the fill of the affordable quantity, rounds it down to lots and prices that quantity
    (one lot less at a time until it fits the cash): a model should fill any smaller quantity in full.
    ``describe()``: one line for the brief.
    """

    def fill(self, side: int, qty: float, price: float, sigma: float, adv: float, limit: float,
             day: str) -> tuple[float, float]: ...

    def describe(self) -> str: ...


class FlatFee:
    """A fixed charge per order whatever its value and side (a broker's ticket fee): the smallest
    :class:`FeeModel`, and the example of docs/quant_arena.md and docs/portbench.md ("Your own cost model").

    ``ImportableModel("quantgym.models:FlatFee", {"per_order": 7.0, "currency": "CNY"})``.
    """

    def __init__(self, per_order: float, currency: str = ""):
        if not (math.isfinite(float(per_order)) and float(per_order) >= 0):
            raise ValueError(f"per_order must be a finite fee >= 0, got {per_order!r}")
        self.per_order, self.currency = float(per_order), str(currency)

    def order_fee(self, value: float, side: int, day: str) -> float:
        return self.per_order

    def describe(self) -> str:
        return f"a flat fee of {self.per_order:g}{' ' + self.currency if self.currency else ''} per order"


#: the tasks' built-in models (compiled kernels), by task and kind: what an :class:`ImportableModel` of the
#: same class path builds, and what runs when a config keeps its default
BUILTIN_MODELS: dict[str, dict[str, str]] = {
    "quant_arena": {"fee": "quantgym.envs.quant_arena.config:ArenaCostModel",
                    "impact": "quantgym.envs.quant_arena.config:ImpactModel"},
    "portbench": {"fee": "quantgym.envs.portbench.config:PortBenchCostModel"},
}


def load_model(class_path: str, kwargs: dict | None = None) -> Any:
    """Import ``"package.module:Class"`` and build it with ``kwargs``.

    Raises
    ------
    ValueError
        One line: the path is not ``module:Class``, the module or the class is not found, or the class
        refuses the arguments.
    """
    mod_name, sep, cls_name = str(class_path).partition(":")
    if not (sep and mod_name and cls_name):
        raise ValueError(f"model class path {class_path!r}: expected 'package.module:Class'")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"model class path {class_path!r}: cannot import {mod_name!r} ({e})") from None
    obj = mod
    for part in cls_name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ValueError(f"model class path {class_path!r}: {mod_name!r} has no {cls_name!r}")
    try:
        return obj(**dict(kwargs or {}))
    except (TypeError, ValueError) as e:
        raise ValueError(f"model class path {class_path!r}: cannot build it with {dict(kwargs or {})} "
                         f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


@dataclass(frozen=True)
class ImportableModel(Config, version="importable-1"):
    """A model named by its class: ``class_path`` ``"package.module:Class"`` and the ``kwargs`` to build it.

    ``ImportableModel("my_fees:FlatFee", {"per_order": 7.0})`` in place of a task's built-in cost model
    (``ArenaConfig(cost=...)``, ``PortBenchConfig(costs=...)``). The class is imported when the model is
    built (:meth:`build`); a wrong path fails there with one line. ``to_dict()`` holds both fields, so
    results record the model.
    """

    class_path: str
    kwargs: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        mod_name, sep, cls_name = str(self.class_path).partition(":")
        if not (sep and mod_name and cls_name):
            raise ValueError(f"model class path {self.class_path!r}: expected 'package.module:Class'")
        if not isinstance(self.kwargs, dict):
            raise ValueError(f"model kwargs must be a dict, got {type(self.kwargs).__name__}")

    def build(self) -> Any:
        """The model object (:func:`load_model`; one-line ``ValueError`` on a bad path or arguments)."""
        return load_model(self.class_path, self.kwargs)

    def describe(self, style: str | None = None) -> str:
        """The built model's ``describe()`` (:func:`describe_model`)."""
        return describe_model(self.build(), self.class_path, self.kwargs, style)


_PROTOCOLS = {"order_fee": ("fee", "order_fee(value, side, day)", "FeeModel"),
              "fill": ("impact", "fill(side, qty, price, sigma, adv, limit, day)", "MarketImpactModel")}


def build_model(model: Any, builtin: type, method: str = "order_fee") -> Any:
    """``model`` ready to run: an :class:`ImportableModel` is built, anything else returned as is.

    ``builtin`` is the task's own model class (its kernels run it); any other object must have the
    protocol's ``method``: ``"order_fee"`` (:class:`FeeModel`) or ``"fill"`` (:class:`MarketImpactModel`).

    Raises
    ------
    ValueError
        One line: a bad class path, or an object without the method.
    """
    obj = model.build() if isinstance(model, ImportableModel) else model
    if isinstance(obj, builtin):
        return obj
    if not callable(getattr(obj, method, None)):
        kind, sig, proto = _PROTOCOLS[method]
        where = model.class_path if isinstance(model, ImportableModel) else type(obj).__name__
        raise ValueError(f"{kind} model {where}: has no {sig} method (quantgym.models.{proto})")
    return obj


def fee_parts(model: Any, value: float, side: int, day: str) -> tuple[float, float, float]:
    """``model.order_fee(value, side, day)`` as ``(commission, transfer, stamp)``: a float is the commission.

    Raises
    ------
    ValueError
        One line: a fee that is not finite and >= 0.
    """
    out = model.order_fee(float(value), int(side), day)
    parts = tuple(float(x) for x in out) if isinstance(out, (tuple, list)) else (float(out), 0.0, 0.0)
    if len(parts) != 3 or not all(math.isfinite(c) and c >= 0 for c in parts):
        raise ValueError(f"fee model {type(model).__name__}: order_fee({value}, {side}, {day!r}) returned {out!r} "
                         "(a fee >= 0, or (commission, transfer, stamp))")
    return parts  # type: ignore[return-value]


def impact_fill(model: Any, side: int, qty: float, price: float, sigma: float, adv: float, limit: float,
                day: str) -> tuple[float, float]:
    """``model.fill(...)`` (:class:`MarketImpactModel`) as two floats.

    Raises
    ------
    ValueError
        One line: ``filled`` outside ``[0, qty]`` or a value that is not finite and >= 0.
    """
    out = model.fill(int(side), float(qty), float(price), float(sigma), float(adv), float(limit), day)
    try:
        filled, value = (float(x) for x in out)
    except (TypeError, ValueError):
        filled = value = math.nan
    if not (0.0 <= filled <= qty + 1e-9 and math.isfinite(value) and value >= 0):
        raise ValueError(f"impact model {type(model).__name__}: fill({side}, {qty}, {price}, ..., {day!r}) returned "
                         f"{out!r} (filled in [0, qty] and a value >= 0)")
    return filled, value


_TAKES_STYLE: dict[Any, bool] = {}


def _takes_style(fn: Any) -> bool:
    """Whether the ``describe`` callable ``fn`` takes a prompt style; cached per underlying function (every S3
    prompt asks, and a signature costs about 0.1 ms)."""
    key = getattr(fn, "__func__", fn)
    if key not in _TAKES_STYLE:
        try:
            _TAKES_STYLE[key] = len(inspect.signature(fn).parameters) > 0
        except (TypeError, ValueError):
            _TAKES_STYLE[key] = False
    return _TAKES_STYLE[key]


def describe_model(obj: Any, class_path: str = "", kwargs: dict | None = None, style: str | None = None) -> str:
    """One line of rule text for a model: its ``describe()`` (``describe(style)`` if it takes a prompt style,
    :data:`quantgym.spaces.PROMPT_STYLES`), else its class path and arguments."""
    fn = getattr(obj, "describe", None)
    if callable(fn):
        return str(fn(style) if style is not None and _takes_style(fn) else fn())
    args = ", ".join(f"{k}={v!r}" for k, v in (kwargs or {}).items())
    return f"fees by the model {class_path or type(obj).__qualname__}({args})"
