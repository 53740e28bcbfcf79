"""Token prices of an LLM agent (USD per 1M prompt / completion tokens) and where each came from.

:func:`resolve_price` takes the first of

1. ``--price-in`` / ``--price-out`` (``price_in`` / ``price_out``): the rate the user pays;
2. a ``--prices`` table (:func:`quantgym.agents.llm.agents.price_for`) that lists the model;
3. the bundled table of common models, ``prices.json`` beside this module: each entry names the
   provider's pricing page, the record it was read in and its date (:func:`bundled_prices`); a dated
   snapshot (``gpt-4o-mini-2024-07-18``) or a provider prefix (``openai/gpt-4o-mini``) finds its model;
4. an endpoint on this machine (a loopback ``--base-url``: llama.cpp, vLLM, Ollama served locally): no
   token price, 0;

else the price is unknown: the cost is ``None`` (shown as not available with one line saying so),
never 0. The quote's ``source`` is recorded in the agent's config (``price_source``) and the results.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

#: the bundled price table (see the module docstring)
PRICES_FILE = Path(__file__).with_name("prices.json")
#: ``source`` of a quote for an endpoint on this machine
LOCAL_SOURCE = "local endpoint (loopback --base-url): no token price"
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


@dataclass(frozen=True)
class PriceQuote:
    """USD per 1M prompt tokens (``price_in``) and completion tokens (``price_out``), and where they came
    from (``source``; None with both prices None: unknown)."""

    price_in: float | None
    price_out: float | None
    source: str | None

    @property
    def known(self) -> bool:
        """Whether a cost can be computed (a missing side of a given pair counts as 0)."""
        return self.price_in is not None or self.price_out is not None


def check_price(value: Any, flag: str) -> float | None:
    """``value`` as a price (None stays None).

    Raises
    ------
    ValueError
        One line naming ``flag``: not a finite number >= 0.
    """
    from quantgym.costs import checked_amount

    return None if value is None else checked_amount(value, False, f"{flag} must be a price >= 0 in USD per 1M tokens")


@lru_cache(maxsize=1)
def bundled_prices() -> dict[str, dict[str, Any]]:
    """The bundled table: model -> ``{"input", "output", "source", "as_of"[, "via"]}`` (USD per 1M tokens)."""
    table = json.loads(PRICES_FILE.read_text())
    return {k: v for k, v in table.items() if not k.startswith("_")}


def table_key(model: str) -> str:
    """The bundled table's name for ``model``: without a ``provider/`` prefix and a dated snapshot suffix."""
    name = model.strip().rsplit("/", 1)[-1]
    return _SNAPSHOT.sub("", name)


def is_local_endpoint(url: str | None) -> bool:
    """Whether ``url``'s host is this machine (``localhost`` or a loopback address)."""
    host = urlparse(url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_price(model: str, *, price_in: Any = None, price_out: Any = None, prices: Any = None,
                  endpoint: str | None = None) -> PriceQuote:
    """The price of ``model`` served at ``endpoint`` (see the module docstring for the order).

    Raises
    ------
    ValueError
        A negative or non-numeric ``price_in`` / ``price_out``, or an unreadable ``prices`` table.
    """
    pi, po = check_price(price_in, "--price-in"), check_price(price_out, "--price-out")
    if pi is not None or po is not None:
        return PriceQuote(pi, po, "--price-in/--price-out")
    if prices is not None:
        from quantgym.agents.llm.agents import price_for

        pi, po = price_for(model, prices)
        if pi is not None or po is not None:
            where = f"--prices {prices}" if isinstance(prices, (str, Path)) else "price table"
            return PriceQuote(check_price(pi, f"{where}: {model} input"), check_price(po, f"{where}: {model} output"),
                              where)
    entry = bundled_prices().get(table_key(model))
    if entry is not None:
        return PriceQuote(float(entry["input"]), float(entry["output"]),
                          f"bundled table: {entry['source']} as of {entry['as_of']}")
    if is_local_endpoint(endpoint):
        return PriceQuote(0.0, 0.0, LOCAL_SOURCE)
    return PriceQuote(None, None, None)


def no_price_note(model: str) -> str:
    """The one line said when no price of ``model`` is known (its cost is not available)."""
    return (f"cost n/a: no price known for {model}; give --price-in/--price-out (USD per 1M tokens) or "
            "--prices FILE (docs/llm-agents.md, 'Returns net of inference cost')")


__all__ = ["PRICES_FILE", "LOCAL_SOURCE", "PriceQuote", "check_price", "bundled_prices", "table_key",
           "is_local_endpoint", "resolve_price", "no_price_note"]
