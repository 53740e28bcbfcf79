"""Tool mode, the generic layer: typed tools with a JSON schema, a per-stage budget and the call protocol.

Longer than 500 lines as one job, the tool protocol: tool schemas, budgets, call parsing and the task binding
refer to each other.

A task declares its toolbox once as plain typed Python functions::

    @tool
    def volatility(assets: list[str], window: int = 63) -> str:
        '''Annualised volatility of the chosen assets over the last `window` trading days.

        Parameters
        ----------
        assets : list[str]
            Asset ids from the universe.
        window : int
            Trading days back from the decision date.
        '''

The decorator turns the annotations into the JSON schema of the OpenAI ``tools=`` format (the model reads the
docstring's summary as the description and each numpy-style ``Parameters`` entry as that argument's
description). ``Toolbox.call`` validates the arguments against that schema (``jsonschema``), charges the
per-stage ``ToolBudget`` and never raises for an agent's error: an unknown tool, bad arguments, a call past
the budget or an exception inside the tool each come back as an ``ok=False`` ``ToolResult`` whose one-line
``content`` says what went wrong. A result longer than the characters left is cut and ends with the explicit
marker ``[truncated: N chars]``; ``ToolResult.truncated`` records N.

The names here are those of the OpenAI function-calling API (``tools``, ``function``, ``parameters``), which
llama.cpp, vLLM, Ollama and LiteLLM serve as well.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Union

ERROR_KINDS = ("unknown_tool", "bad_arguments", "budget_exhausted", "tool_error")
_SECTION = re.compile(r"^(Parameters|Returns|Yields|Raises|Notes|Examples|See Also|References)\s*$")
_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


class ToolArgumentError(ValueError):
    """Raised by a tool for an argument value its schema cannot rule out (an unknown asset id, a window longer
    than the data): the call is answered with ``error="bad_arguments"`` and the message, like a schema error."""


@dataclass(frozen=True)
class Tool:
    """One tool: what the model reads (name, description, JSON-schema parameters) and the function it runs."""

    name: str
    description: str
    parameters: dict
    fn: Callable[..., str]
    cost: int = 1

    def schema(self) -> dict:
        """This tool as one entry of the OpenAI ``tools=`` list."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    def __call__(self, *args, **kwargs) -> str:
        return self.fn(*args, **kwargs)


@dataclass(frozen=True)
class ToolBudget:
    """A per-stage tool budget: ``calls`` (each tool's ``cost`` counts) and ``chars`` (result characters)."""

    calls: int
    chars: int

    def __post_init__(self):
        for name in ("calls", "chars"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"ToolBudget.{name} must be an integer >= 0, got {v!r}")

    def to_dict(self) -> dict:
        return {"calls": self.calls, "chars": self.chars}


@dataclass
class BudgetState:
    """What a stage has used of its ``ToolBudget``; ``reset()`` at each stage start."""

    budget: ToolBudget
    calls_used: int = 0
    chars_used: int = 0

    @property
    def calls_left(self) -> int:
        return max(0, self.budget.calls - self.calls_used)

    @property
    def chars_left(self) -> int:
        return max(0, self.budget.chars - self.chars_used)

    def reset(self) -> None:
        self.calls_used = 0
        self.chars_used = 0

    def to_dict(self) -> dict:
        return {**self.budget.to_dict(), "calls_used": self.calls_used, "chars_used": self.chars_used,
                "calls_left": self.calls_left, "chars_left": self.chars_left}


@dataclass
class ToolResult:
    """The outcome of one tool call; ``content`` is what the model reads (``error: ...`` when ``ok`` is False)."""

    tool: str
    arguments: Any
    ok: bool
    content: str
    error: str | None = None
    truncated: int = 0
    calls_left: int = 0
    chars_left: int = 0

    def to_dict(self) -> dict:
        return {"tool": self.tool, "arguments": self.arguments, "ok": self.ok, "content": self.content,
                "error": self.error, "truncated": self.truncated, "calls_left": self.calls_left,
                "chars_left": self.chars_left}


# ---------------------------------------------------------------------------------------------- schemas


def _type_schema(tp: Any, where: str) -> dict:
    """The JSON schema of one annotation (the types a tool argument may take)."""
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        kinds = {_JSON_TYPES.get(type(a)) for a in args}
        if None in kinds or len(kinds) != 1:
            raise TypeError(f"{where}: Literal values must share one of int, float, str, bool")
        return {"type": kinds.pop(), "enum": list(args)}
    if origin is list or tp is list:
        if not args:
            raise TypeError(f"{where}: give the item type, e.g. list[str]")
        return {"type": "array", "items": _type_schema(args[0], where)}
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1 or len(args) != 2:
            raise TypeError(f"{where}: only Optional[X] unions are supported")
        inner = dict(_type_schema(rest[0], where))
        if "enum" in inner:
            inner["enum"] = [*inner["enum"], None]
        inner["type"] = [inner["type"], "null"]
        return inner
    raise TypeError(f"{where}: unsupported annotation {tp!r} (int, float, str, bool, list[...], Literal, Optional)")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(the description before the first numpy-style section, {argument: its description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    head: list[str] = []
    params: dict[str, list[str]] = {}
    i, section = 0, None
    while i < len(lines):
        line = lines[i]
        if _SECTION.match(line.strip()) and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}:
            section, i = line.strip(), i + 2
            continue
        if section is None:
            head.append(line)
        elif section == "Parameters" and line.strip():
            if not line.startswith((" ", "\t")):
                current = line.split(":")[0].strip()
                params[current] = []
            elif params:
                params[next(reversed(params))].append(line.strip())
        i += 1
    return "\n".join(head).strip(), {k: " ".join(v) for k, v in params.items() if v}


def tool(fn: Callable[..., str] | None = None, *, name: str | None = None, cost: int = 1):
    """Build a ``Tool`` from a typed function (usable as ``@tool`` or ``@tool(name=..., cost=...)``).

    The JSON schema comes from the annotations (int, float, str, bool, list[X], Literal[...], Optional[X]);
    an argument with a default is not required. The description is the docstring before its first
    numpy-style section; a ``Parameters`` block gives each argument's description.
    """
    if fn is None:
        return lambda f: tool(f, name=name, cost=cost)
    if isinstance(cost, bool) or not isinstance(cost, int) or cost < 0:
        raise ValueError(f"tool cost must be an integer >= 0, got {cost!r}")
    tool_name = name or fn.__name__
    description, arg_docs = _parse_docstring(fn.__doc__)
    if not description:
        raise ValueError(f"tool {tool_name!r} needs a docstring: it is what the model reads")
    hints = typing.get_type_hints(fn)
    properties, required = {}, []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name!r}: *args/**kwargs cannot be described by a schema")
        if p.name not in hints:
            raise TypeError(f"tool {tool_name!r}: argument {p.name!r} needs a type annotation")
        prop = _type_schema(hints[p.name], f"tool {tool_name!r} argument {p.name!r}")
        if p.name in arg_docs:
            prop["description"] = arg_docs[p.name]
        if p.default is p.empty:
            required.append(p.name)
        elif p.default is None or isinstance(p.default, (int, float, str, bool)):
            prop["default"] = p.default
        elif isinstance(p.default, (list, tuple)):
            prop["default"] = list(p.default)
        properties[p.name] = prop
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return Tool(name=tool_name, description=description, parameters=parameters, fn=fn, cost=cost)


# --------------------------------------------------------------------------------------------- checking
#: the keywords :func:`tool` writes; a schema with only these is checked by :func:`schema_errors`, any other by
#: ``jsonschema`` (which costs about 0.2 ms a call, a fifth of a PortBench tool call's budget)
_OWN_KEYWORDS = frozenset({"type", "enum", "items", "properties", "required", "additionalProperties", "default",
                           "description"})
_PY_TYPES = {"integer": int, "number": (int, float), "string": str, "boolean": bool, "array": list, "object": dict,
             "null": type(None)}


def _own_schema(schema: Any) -> bool:
    """Whether ``schema`` uses only the keywords :func:`tool` writes (so :func:`schema_errors` checks it)."""
    if not isinstance(schema, dict) or not set(schema) <= _OWN_KEYWORDS:
        return False
    if schema.get("additionalProperties", False) is not False:
        return False
    types_ = schema.get("type")
    if not all(t in _PY_TYPES for t in (types_ if isinstance(types_, list) else [types_])):
        return False
    return (all(_own_schema(p) for p in schema.get("properties", {}).values())
            and ("items" not in schema or _own_schema(schema["items"])))


def _is_type(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()  # JSON Schema: 1.0 is an integer
    return isinstance(value, _PY_TYPES[name])


def _integers(schema: dict, value: Any) -> Any:
    """``value`` with the integer-valued floats at ``"integer"`` places made ``int`` (JSON has one number type:
    ``60.0`` is the integer 60, as the schema check accepts it); a new object only where one changes."""
    types_ = schema.get("type")
    names = types_ if isinstance(types_, list) else [types_]
    if isinstance(value, float) and "integer" in names and "number" not in names:
        return int(value)
    if isinstance(value, list) and "items" in schema:
        new = [_integers(schema["items"], v) for v in value]
        return new if any(a is not b for a, b in zip(new, value)) else value
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        new = {k: _integers(props[k], v) if k in props else v for k, v in value.items()}
        return new if any(new[k] is not value[k] for k in value) else value
    return value


def schema_errors(schema: dict, value: Any, path: tuple = ()) -> list[tuple[tuple, str]]:
    """``(path, message)`` of each way ``value`` breaks ``schema`` (the keywords :func:`tool` writes), with the
    messages ``jsonschema`` gives (tested against it)."""
    types_ = schema.get("type")
    if types_ is not None:
        names = types_ if isinstance(types_, list) else [types_]
        if not any(_is_type(value, t) for t in names):
            return [(path, f"{value!r} is not of type {', '.join(repr(t) for t in names)}")]
    if "enum" in schema and not any(value == e and isinstance(value, bool) == isinstance(e, bool)
                                    for e in schema["enum"]):
        return [(path, f"{value!r} is not one of {schema['enum']!r}")]
    out: list[tuple[tuple, str]] = []
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += schema_errors(schema["items"], item, path + (i,))
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties", {})
        for k, sub in props.items():
            if k in value:
                out += schema_errors(sub, value[k], path + (k,))
        for k in schema.get("required", ()):
            if k not in value:
                out.append((path, f"{k!r} is a required property"))
        extra = sorted((k for k in value if k not in props), key=str)
        if extra and schema.get("additionalProperties", True) is False:
            out.append((path, "Additional properties are not allowed ("
                        + ", ".join(repr(k) for k in extra) + (" were" if len(extra) > 1 else " was") + " unexpected)"))
    return out


# --------------------------------------------------------------------------------------------- calling


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@dataclass
class Toolbox:
    """A task's tools for one stage: ``schemas()`` for the model, ``call()`` for the env."""

    tools: list[Tool] | tuple[Tool, ...]
    _by_name: dict[str, Tool] = field(init=False, repr=False)
    _validators: dict[str, Any] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        self.tools = tuple(self.tools)
        self._by_name = {}
        for t in self.tools:
            if not isinstance(t, Tool):
                raise TypeError(f"Toolbox takes Tool objects (use @tool), got {type(t).__name__}")
            if t.name in self._by_name:
                raise ValueError(f"two tools named {t.name!r}")
            self._by_name[t.name] = t

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.tools)

    def __iter__(self):
        return iter(self.tools)

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def schemas(self) -> list[dict]:
        """The OpenAI ``tools=`` list: ``{"type": "function", "function": {name, description, parameters}}``."""
        return [t.schema() for t in self.tools]

    def validate(self, name: str, arguments: Any) -> str | None:
        """None when ``arguments`` fit the tool's schema, else a one-line reason."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        validator = self._validators.get(name)
        if validator is None:
            schema = self._by_name[name].parameters
            if _own_schema(schema):
                validator = schema
            else:
                from jsonschema import Draft202012Validator

                validator = Draft202012Validator(schema)
            self._validators[name] = validator
        if isinstance(validator, dict):
            errors = schema_errors(validator, arguments)
        else:
            errors = [(tuple(e.absolute_path), e.message) for e in validator.iter_errors(arguments)]
        if not errors:
            return None
        where, message = sorted(errors, key=lambda e: [str(p) for p in e[0]])[0]
        where = ".".join(str(p) for p in where)
        return _one_line(f"{where}: {message}" if where else message)

    def call(self, name: str, arguments: Any, state: BudgetState) -> ToolResult:
        """Run one call against the budget ``state``; never raises for the agent's errors.

        An unknown tool, bad arguments and a tool that raises each use one call of the budget (so a policy
        cannot loop on errors for free); a call past the budget uses nothing and reads ``budget_exhausted``.
        """
        def fail(kind: str, message: str, charge: int = 1) -> ToolResult:
            state.calls_used += charge
            return ToolResult(tool=str(name), arguments=arguments, ok=False, content=f"error: {_one_line(message)}",
                              error=kind, calls_left=state.calls_left, chars_left=state.chars_left)

        t = self._by_name.get(name) if isinstance(name, str) else None
        if state.calls_left <= 0 or (t is not None and t.cost > state.calls_left):
            return fail("budget_exhausted", f"tool budget exhausted ({state.budget.calls} calls per stage): "
                                            "give the stage answer", charge=0)
        if state.chars_left <= 0:
            return fail("budget_exhausted", f"tool budget exhausted ({state.budget.chars} result characters per "
                                            "stage): give the stage answer", charge=0)
        if t is None:
            return fail("unknown_tool", f"unknown tool {name!r}; tools: {', '.join(self.names)}")
        reason = self.validate(t.name, arguments)
        if reason is not None:
            return fail("bad_arguments", f"bad arguments for {t.name}: {reason}", charge=t.cost)
        arguments = _integers(t.parameters, arguments)
        try:
            out = t.fn(**arguments)
        except ToolArgumentError as exc:
            return fail("bad_arguments", f"bad arguments for {t.name}: {exc}", charge=t.cost)
        except Exception as exc:  # the tool's own error reaches the model as a result, never the policy loop
            return fail("tool_error", f"{t.name} failed: {type(exc).__name__}: {exc}", charge=t.cost)
        content = out if isinstance(out, str) else json.dumps(out, default=str)
        state.calls_used += t.cost
        cut = max(0, len(content) - state.chars_left)
        if cut:
            content = content[: state.chars_left] + f"\n[truncated: {cut} chars]"
        state.chars_used += len(content) - (len(f"\n[truncated: {cut} chars]") if cut else 0)
        return ToolResult(tool=t.name, arguments=arguments, ok=True, content=content, truncated=cut,
                          calls_left=state.calls_left, chars_left=state.chars_left)


def parse_tool_call(action: Any) -> tuple[str, Any] | None:
    """``(name, arguments)`` when ``action`` is a tool call, else None (a stage answer).

    A tool call is a dict with a ``"tool"`` key, ``{"tool": name, "arguments": {...}}``, or a JSON string of
    one; ``arguments`` may be omitted (``{}``) or be a JSON string of the object (as OpenAI ``tool_calls``
    carry it). What is meant as a call but is malformed is still a call, answered with an error result
    rather than taken for a stage answer: a name that is not a string (``unknown_tool``), arguments that
    are not an object, and a string that starts like a call but is not JSON (``bad_arguments``).
    """
    if isinstance(action, (str, bytes)):
        text = action.decode() if isinstance(action, bytes) else action
        text = text.strip()
        if not (text.startswith("{") and '"tool"' in text):
            return None
        try:
            action = json.loads(text)
        except ValueError:
            m = re.search(r'"tool"\s*:\s*"([^"]*)"', text)
            return (m.group(1) if m else ""), text  # a malformed call: its text is no arguments object
    if not isinstance(action, dict) or "tool" not in action:
        return None
    if not isinstance(action["tool"], str):
        return str(action["tool"]), {}
    arguments = action.get("arguments", {})
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            pass
    return action["tool"], arguments


# ------------------------------------------------------------------------------------ a task's tools in an env


def tool_use(log: list[dict]) -> dict:
    """The tool use of an episode from its calls (``ToolResult.to_dict()`` records): calls, failed calls by
    kind, result characters of the successful ones, truncated results (the episode metrics of docs/tools.md)."""
    errors: dict[str, int] = {}
    for r in log:
        if not r["ok"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    return {"tool_calls": len(log), "tool_errors": sum(errors.values()), "tool_error_kinds": errors,
            "tool_result_chars": sum(len(r["content"]) for r in log if r["ok"]),
            "tool_truncated": sum(1 for r in log if r["truncated"])}


class ToolConfig:
    """Mixin of a task's tool-mode config (a frozen :class:`quantgym.config.Config` dataclass with ``calls``,
    ``chars`` and further integer budgets): every field an integer >= 0, and :attr:`budget`."""

    def __post_init__(self) -> None:
        import dataclasses

        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{type(self).__name__}.{f.name} must be an integer >= 0, got {v!r}")

    @property
    def budget(self) -> ToolBudget:
        """The per-stage :class:`ToolBudget` (``calls``, ``chars``)."""
        return ToolBudget(calls=self.calls, chars=self.chars)  # type: ignore[attr-defined]


class TaskTools:
    """A task's tools bound to one env: the stage budget, the episode's call log and the tools that answer.

    A subclass sets ``config_class`` (a :class:`ToolConfig`), ``answer_tools`` (the tools that are the stage's
    answer in tool form) and ``_build()`` (the :class:`Toolbox` of closures over ``self.env``), and may refuse
    a call for a budget of its own in ``refuse(name)`` (a one-line reason, else None). :meth:`run` runs a call:

    - a refused call gives ``budget_exhausted`` and uses nothing;
    - an answer tool uses no call of the stage budget (it ends the stage, whose budget then starts again); a
      failed answer (bad arguments, a value the task refuses) uses one;
    - any other call goes through :meth:`Toolbox.call` on the stage budget.
    """

    config_class: Any = None
    answer_tools: tuple[str, ...] = ()

    def __init__(self, env: Any, config: Any = None):
        if isinstance(config, dict):
            config = self.config_class.from_dict(config)
        if config is not None and not isinstance(config, self.config_class):
            raise TypeError(f"tool_config must be a {self.config_class.__name__}, got {type(config).__name__}")
        self.env = env
        self.config = config or self.config_class()
        self.state = BudgetState(self.config.budget)
        #: every call of the episode: where it was made (task fields) and its result
        self.log: list[dict] = []
        self._toolbox: Toolbox | None = None

    @property
    def toolbox(self) -> Toolbox:
        """The tools bound to the env (built on first use: after unpickling, once the env is restored)."""
        if self._toolbox is None:
            self._toolbox = self._build()
        return self._toolbox

    def __getstate__(self) -> dict:  # the tools are closures over the env: rebuilt after unpickling
        return dict(self.__dict__, _toolbox=None)

    def _build(self) -> Toolbox:
        raise NotImplementedError

    def refuse(self, name: str) -> str | None:
        """A one-line reason when a budget of the task's own refuses the call ``name``, else None."""
        return None

    def reset(self) -> None:
        """A new episode: the stage budget and the log start again."""
        self.state.reset()
        self.log = []

    def run(self, name: Any, arguments: Any, **where: Any) -> ToolResult:
        """One call (see the class docstring), appended to :attr:`log` with the fields ``where``."""
        answer = name in self.answer_tools and name in self.toolbox
        open_ = answer or (self.state.calls_left > 0 and self.state.chars_left > 0)
        why = self.refuse(name) if open_ and isinstance(name, str) else None
        if why is not None:
            res = ToolResult(tool=name, arguments=arguments, ok=False, content=f"error: {_one_line(why)}",
                             error="budget_exhausted")
        elif answer:
            res = self.toolbox.call(name, arguments, BudgetState(ToolBudget(calls=1, chars=1 << 62)))
            if res.ok:
                self.state.reset()
            else:
                self.state.calls_used += 1
        else:
            res = self.toolbox.call(name, arguments, self.state)
        res.calls_left, res.chars_left = self.state.calls_left, self.state.chars_left
        self.log.append({**where, **res.to_dict()})
        return res

    def metrics(self) -> dict:
        """The episode's tool use (:func:`tool_use` of the log)."""
        return tool_use(self.log)

    def budget_info(self) -> dict:
        """``info["tool_budget"]``: the stage budget, used and left (a task adds its own budgets)."""
        return self.state.to_dict()

    def stage_info(self, ended: bool) -> dict:
        """The info of a step that answered the stage: ``tool_budget`` and, when a next stage starts (not
        ``ended``), ``tools`` (the schemas, as at ``reset``)."""
        return {"tool_budget": self.budget_info(), **({} if ended else {"tools": self.toolbox.schemas()})}
