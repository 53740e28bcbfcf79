"""The generic tool layer (quantgym.tools): schemas from annotations and docstrings, argument validation,
the per-stage budget, the truncation marker and agent errors returned as results, never raised."""

from __future__ import annotations

import json
from typing import Literal, Optional

import pytest

from quantgym.tools import BudgetState, Tool, ToolBudget, ToolResult, Toolbox, parse_tool_call, tool


@tool
def returns(assets: list[str], window: int = 63, kind: Literal["simple", "log"] = "simple",
            scale: Optional[float] = None, annualise: bool = True) -> str:
    """Returns of the chosen assets over a window.

    Parameters
    ----------
    assets : list[str]
        Asset ids from the universe.
    window : int
        Trading days back from the decision date.
    """
    return json.dumps({"assets": assets, "window": window, "kind": kind, "scale": scale, "annualise": annualise})


@tool(name="boom", cost=2)
def _boom(x: int) -> str:
    """Always fails."""
    raise ZeroDivisionError("division by zero")


@tool
def long_text(n: int) -> str:
    """n characters of text."""
    return "x" * n


def box():
    return Toolbox([returns, _boom, long_text])


def test_schema_from_annotations_and_docstring():
    assert isinstance(returns, Tool) and returns.cost == 1 and _boom.cost == 2 and _boom.name == "boom"
    assert returns.description == "Returns of the chosen assets over a window."
    p = returns.parameters
    assert p["type"] == "object" and p["required"] == ["assets"] and p["additionalProperties"] is False
    props = p["properties"]
    assert props["assets"] == {"type": "array", "items": {"type": "string"}, "description": "Asset ids from the universe."}
    assert props["window"] == {"type": "integer", "description": "Trading days back from the decision date.",
                               "default": 63}
    assert props["kind"] == {"type": "string", "enum": ["simple", "log"], "default": "simple"}
    assert props["scale"] == {"type": ["number", "null"], "default": None}
    assert props["annualise"] == {"type": "boolean", "default": True}
    s = box().schemas()
    assert [e["function"]["name"] for e in s] == ["returns", "boom", "long_text"]
    assert s[0] == {"type": "function", "function": {"name": "returns", "description": returns.description,
                                                     "parameters": p}}
    json.dumps(s)  # the OpenAI tools= list is plain JSON


def test_a_tool_needs_annotations_and_a_docstring():
    def nodoc(x: int) -> str:
        return ""

    def untyped(x) -> str:
        """Doc."""
        return ""

    def dicty(x: dict) -> str:
        """Doc."""
        return ""

    with pytest.raises(ValueError, match="docstring"):
        tool(nodoc)
    with pytest.raises(TypeError, match="annotation"):
        tool(untyped)
    with pytest.raises(TypeError, match="unsupported"):
        tool(dicty)
    with pytest.raises(ValueError, match="two tools"):
        Toolbox([returns, returns])


def test_a_good_call_runs_and_uses_the_budget():
    st = BudgetState(ToolBudget(calls=3, chars=10_000))
    r = box().call("returns", {"assets": ["SPY"], "window": 21}, st)
    assert r.ok and r.error is None and r.truncated == 0
    assert json.loads(r.content) == {"assets": ["SPY"], "window": 21, "kind": "simple", "scale": None,
                                     "annualise": True}
    assert (st.calls_used, st.chars_used) == (1, len(r.content))
    assert (r.calls_left, r.chars_left) == (2, 10_000 - len(r.content))
    assert r.to_dict()["tool"] == "returns" and r.to_dict()["arguments"] == {"assets": ["SPY"], "window": 21}


@pytest.mark.parametrize("args, needle", [
    ({}, "'assets' is a required property"),
    ({"assets": "SPY"}, "assets: 'SPY' is not of type 'array'"),
    ({"assets": [1]}, "assets.0: 1 is not of type 'string'"),
    ({"assets": ["SPY"], "window": 2.5}, "window: 2.5 is not of type 'integer'"),
    ({"assets": ["SPY"], "window": True}, "window: True is not of type 'integer'"),
    ({"assets": ["SPY"], "kind": "cubic"}, "kind: 'cubic' is not one of ['simple', 'log']"),
    ({"assets": ["SPY"], "colour": "red"}, "Additional properties are not allowed ('colour' was unexpected)"),
    (["SPY"], "arguments must be a JSON object, got list"),
])
def test_bad_arguments_are_a_result_not_an_exception(args, needle):
    st = BudgetState(ToolBudget(calls=3, chars=100))
    r = box().call("returns", args, st)
    assert not r.ok and r.error == "bad_arguments" and r.content.startswith("error: bad arguments for returns")
    assert needle in r.content and "\n" not in r.content
    assert st.calls_used == 1 and st.chars_used == 0  # an error still uses a call


def test_unknown_tool_and_a_tool_that_raises():
    st = BudgetState(ToolBudget(calls=5, chars=100))
    r = box().call("prices_tomorrow", {}, st)
    assert (r.ok, r.error) == (False, "unknown_tool")
    assert r.content == "error: unknown tool 'prices_tomorrow'; tools: returns, boom, long_text"
    r = box().call("boom", {"x": 1}, st)
    assert (r.ok, r.error) == (False, "tool_error")
    assert r.content == "error: boom failed: ZeroDivisionError: division by zero"
    assert st.calls_used == 1 + 2  # the unknown tool one call, boom its cost


def test_budget_exhaustion_by_calls_and_by_chars():
    tb = box()
    st = BudgetState(ToolBudget(calls=2, chars=1000))
    assert tb.call("long_text", {"n": 1}, st).ok and tb.call("long_text", {"n": 1}, st).ok
    r = tb.call("long_text", {"n": 1}, st)
    assert (r.ok, r.error, r.calls_left) == (False, "budget_exhausted", 0)
    assert "2 calls per stage" in r.content and st.calls_used == 2  # a refused call uses nothing
    st.reset()
    assert (st.calls_used, st.chars_used, st.calls_left) == (0, 0, 2)
    r = tb.call("boom", {"x": 1}, BudgetState(ToolBudget(calls=1, chars=10)))  # costs 2 > 1 left
    assert r.error == "budget_exhausted"
    st = BudgetState(ToolBudget(calls=5, chars=10))
    assert tb.call("long_text", {"n": 10}, st).ok and st.chars_left == 0
    r = tb.call("long_text", {"n": 1}, st)
    assert r.error == "budget_exhausted" and "10 result characters" in r.content


def test_a_long_result_is_cut_with_the_explicit_marker():
    st = BudgetState(ToolBudget(calls=5, chars=100))
    tb = box()
    r = tb.call("long_text", {"n": 60}, st)
    assert r.ok and r.truncated == 0 and st.chars_left == 40
    r = tb.call("long_text", {"n": 250}, st)
    assert r.ok and r.truncated == 210 and r.content == "x" * 40 + "\n[truncated: 210 chars]"
    assert r.chars_left == 0 and st.chars_used == 100 and r.to_dict()["truncated"] == 210


def test_budget_values_are_checked():
    with pytest.raises(ValueError, match="calls"):
        ToolBudget(calls=-1, chars=10)
    with pytest.raises(ValueError, match="chars"):
        ToolBudget(calls=1, chars=1.5)
    assert BudgetState(ToolBudget(3, 9)).to_dict() == {"calls": 3, "chars": 9, "calls_used": 0, "chars_used": 0,
                                                        "calls_left": 3, "chars_left": 9}


def test_parse_tool_call():
    assert parse_tool_call({"tool": "returns", "arguments": {"assets": ["A"]}}) == ("returns", {"assets": ["A"]})
    assert parse_tool_call({"tool": "universe"}) == ("universe", {})
    assert parse_tool_call('{"tool": "returns", "arguments": {"window": 5}}') == ("returns", {"window": 5})
    assert parse_tool_call({"tool": "r", "arguments": '{"window": 5}'}) == ("r", {"window": 5})
    assert parse_tool_call({"tool": "r", "arguments": "not json"}) == ("r", "not json")  # -> bad_arguments
    for answer in ("SPY: 0.5, TLT: 0.5", '{"weights": {"SPY": 1}}', {"SPY": 1.0}, "{not json", None, 3):
        assert parse_tool_call(answer) is None
    # meant as calls but malformed: still calls, answered with error results (never a stage answer)
    assert parse_tool_call({"tool": 5}) == ("5", {}) and parse_tool_call({"tool": None}) == ("None", {})
    assert parse_tool_call('{"tool": "returns"') == ("returns", '{"tool": "returns"')
    assert box().call(*parse_tool_call({"tool": None}), BudgetState(ToolBudget(3, 100))).error == "unknown_tool"
    r = box().call(*parse_tool_call('{"tool": "returns", "arguments": {'), BudgetState(ToolBudget(3, 100)))
    assert r.error == "bad_arguments" and "JSON object" in r.content
    st = BudgetState(ToolBudget(3, 100))
    r = box().call(*parse_tool_call({"tool": "returns", "arguments": "not json"}), st)
    assert r.error == "bad_arguments" and "got str" in r.content
    assert isinstance(r, ToolResult)


def test_a_tool_refusing_a_value_gives_bad_arguments():
    from quantgym.tools import ToolArgumentError

    @tool
    def lookup(asset: str) -> str:
        """Look an asset up."""
        raise ToolArgumentError(f"unknown asset {asset!r}; ids: A, B")

    st = BudgetState(ToolBudget(3, 100))
    r = Toolbox([lookup]).call("lookup", {"asset": "Z"}, st)
    assert (r.ok, r.error) == (False, "bad_arguments")
    assert r.content == "error: bad arguments for lookup: unknown asset 'Z'; ids: A, B" and st.calls_used == 1


def test_own_schema_check_gives_jsonschema_verdicts_and_messages():
    """The keywords @tool writes are checked without jsonschema (speed); a seeded sweep of argument values,
    good and bad, gets jsonschema's verdict and first message."""
    import random

    from jsonschema import Draft202012Validator

    @tool
    def many(a: int, b: list[int], c: Optional[str] = None, d: Literal["x", "y"] = "x", e: float = 1.0,
             f: bool = False, g: list[str] = ()) -> str:
        """All kinds."""
        return "ok"

    tb = Toolbox([many])
    v = Draft202012Validator(many.parameters)
    pool = [0, 1, -3, 2.0, 2.5, True, None, "x", "y", "z", [], [1, 2], [1.0], ["s"], [True], {}, {"k": 1}]
    rng = random.Random(0)
    for _ in range(3000):
        args = {k: rng.choice(pool) for k in rng.sample("abcdefgh", rng.randint(0, 5))}
        mine = tb.validate("many", args)
        errs = sorted(v.iter_errors(args), key=lambda e: [str(p) for p in e.absolute_path])
        ref = None
        if errs:
            where = ".".join(str(p) for p in errs[0].absolute_path)
            ref = " ".join((f"{where}: {errs[0].message}" if where else errs[0].message).split())
        assert (mine is None) == (ref is None), args
        if mine is not None:
            assert mine == ref, args


def test_integer_valued_floats_reach_the_tool_as_int():
    @tool
    def take(n: int, ns: list[int] = ()) -> str:
        """Echo the types."""
        return f"{type(n).__name__} {[type(x).__name__ for x in ns]}"

    r = Toolbox([take]).call("take", {"n": 60.0, "ns": [1.0, 2]}, BudgetState(ToolBudget(2, 100)))
    assert r.ok and r.content == "int ['int', 'int']"
