"""Sweep grids: agents × env ids × env kwargs × seeds, expanded into runs with stable ids.

A grid is a YAML file (or the equivalent CLI flags)::

    name: stress-baselines          # optional label, written into results.json
    data: null                      # optional PortBench data directory (default: bundled real data)
    agents: [equal_weight, risk_parity, "openai:gpt-4o-mini"]
    envs: [PortBench-Conservative-v0, PortBench-Aggressive-v0]
    env_kwargs:                     # a scalar, or a list of alternatives (cartesian product)
      period: [covid_2020, china_2015]
    seeds: [0, 1]
    agent_options: {}               # passed to make_agent(spec, task=..., **options)
    blind: [false, true]            # optional: named and blind runs (docs/blind.md; env kwarg ``blind``)

Several blocks can be combined with ``grids: [{...}, {...}]``; each block inherits the
top-level keys it does not set. An agent is a spec string of
:func:`quantgym.agents.registry.make_agent` or ``{spec: ..., options: {...}}``. To pass a
literal list as one env kwarg value, wrap it in another list (``weights: [[0.5, 0.5]]``).
``blind`` (``true``, ``false`` or both) is the env kwarg ``blind`` of the PortBench and Quant-Arena ids
(docs/blind.md); ``blind: false`` is the default and is left out of the run spec, so a named run keeps
its run id when a grid gains ``blind: [false, true]``.

Run ids: ``sha256`` of the canonical JSON of the run spec (keys sorted, no whitespace,
with :data:`RUN_SPEC_VERSION`), first 16 hex digits. The same run in another grid,
another order or another machine gets the same id, which is what makes sweeps resumable.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

#: part of every run id: bump when the meaning of a run spec changes (invalidates old run files)
RUN_SPEC_VERSION = "sweep-run-v1"

_BLOCK_KEYS = {"agents", "envs", "env_kwargs", "seeds", "agent_options", "blind"}
_TOP_KEYS = _BLOCK_KEYS | {"name", "data", "grids"}


class GridError(ValueError):
    """A malformed grid file or grid flags."""


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: one agent on one env id with fixed kwargs and seed.

    Attributes
    ----------
    agent : agent spec (``equal_weight``, ``openai:MODEL``, ``replay:FILE``, ``sb3:PATH``...).
    env_id : registered Gymnasium id (``PortBench-Conservative-v0``...).
    env_kwargs : JSON-able kwargs passed to ``gym.make`` (``period=...``); never ``data``.
    seed : passed to ``env.reset``.
    agent_options : JSON-able kwargs of ``make_agent``.
    data : the data directory handed to the sweep hooks' ``load_data`` of the tasks that share data (e.g.
        PortBench's), or None for the bundled real data.
    """

    agent: str
    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = 0
    agent_options: Mapping[str, Any] = field(default_factory=dict)
    data: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "env_id": self.env_id, "env_kwargs": dict(self.env_kwargs), "seed": self.seed,
                "agent_options": dict(self.agent_options), "data": self.data}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunSpec":
        return cls(agent=d["agent"], env_id=d["env_id"], env_kwargs=dict(d.get("env_kwargs") or {}),
                   seed=d.get("seed"), agent_options=dict(d.get("agent_options") or {}), data=d.get("data"))

    def canonical(self) -> str:
        """Canonical JSON text of the spec (the hash input)."""
        return json.dumps({"v": RUN_SPEC_VERSION, **self.to_dict()}, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=False)

    @property
    def run_id(self) -> str:
        """Stable id: first 16 hex digits of sha256(:meth:`canonical`)."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        kw = ",".join(f"{k}={v}" for k, v in sorted(self.env_kwargs.items()))
        return f"{self.agent} @ {self.env_id}" + (f" [{kw}]" if kw else "") + f" seed={self.seed}"


@dataclass(frozen=True)
class Grid:
    """A parsed grid: its name, data directory and blocks (see module docstring)."""

    name: str
    data: str | None
    blocks: tuple[dict[str, Any], ...]

    def expand(self) -> list[RunSpec]:
        """All runs in grid order (block, agent, env, kwargs product, seed); duplicates removed."""
        runs: list[RunSpec] = []
        seen: set[str] = set()
        for b in self.blocks:
            kw_items = sorted(b["env_kwargs"].items())
            keys = [k for k, _ in kw_items]
            choices = [v if isinstance(v, list) else [v] for _, v in kw_items]
            for agent in b["agents"]:
                for env_id in b["envs"]:
                    for combo in itertools.product(*choices):
                        kw = dict(zip(keys, combo))
                        if kw.get("blind") is False:  # the default: a named run keeps its run id
                            del kw["blind"]
                        for seed in b["seeds"]:
                            spec = RunSpec(agent=agent["spec"], env_id=env_id, env_kwargs=kw,
                                           seed=seed, agent_options={**b["agent_options"], **agent["options"]},
                                           data=self.data)
                            spec.canonical()  # validates JSON-ability
                            if spec.run_id not in seen:
                                seen.add(spec.run_id)
                                runs.append(spec)
        return runs

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "data": self.data, "grids": [dict(b) for b in self.blocks]}


def _as_list(value: Any, what: str) -> list:
    if value is None:
        return []
    if isinstance(value, (str, int, dict)):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise GridError(f"{what} must be a value or a list, got {type(value).__name__}")


#: agent options never accepted in a grid: they would be written into sweep.json and every run record
SECRET_OPTIONS = ("api_key",)


def _no_secrets(opts: Mapping[str, Any], where: str) -> None:
    bad = [k for k in opts if k in SECRET_OPTIONS]
    if bad:
        raise GridError(f"{where}: option(s) {bad} would be stored in the results; set the key in the environment "
                        "instead (OPENAI_API_KEY; on Ray: runtime_env env_vars)")


def _agent(entry: Any) -> dict[str, Any]:
    if isinstance(entry, str) and entry.strip():
        return {"spec": entry.strip(), "options": {}}
    if isinstance(entry, dict) and isinstance(entry.get("spec"), str):
        extra = set(entry) - {"spec", "options"}
        if extra:
            raise GridError(f"agent entry {entry!r}: unknown key(s) {sorted(extra)} (allowed: spec, options)")
        opts = entry.get("options") or {}
        if not isinstance(opts, dict):
            raise GridError(f"agent {entry['spec']!r}: options must be a mapping")
        _no_secrets(opts, f"agent {entry['spec']!r}")
        return {"spec": entry["spec"], "options": dict(opts)}
    raise GridError(f"agent entry must be a spec string or {{spec: ..., options: {{...}}}}, got {entry!r}")


def _block(raw: Mapping[str, Any], defaults: Mapping[str, Any], where: str) -> dict[str, Any]:
    unknown = set(raw) - _BLOCK_KEYS
    if unknown:
        raise GridError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_BLOCK_KEYS)}")
    merged = {**{k: v for k, v in defaults.items() if k in _BLOCK_KEYS}, **raw}
    agents = [_agent(a) for a in _as_list(merged.get("agents"), f"{where}.agents")]
    envs = [str(e) for e in _as_list(merged.get("envs"), f"{where}.envs")]
    if not agents:
        raise GridError(f"{where}: no agents")
    if not envs:
        raise GridError(f"{where}: no envs (env ids such as PortBench-Conservative-v0)")
    kw = merged.get("env_kwargs") or {}
    if not isinstance(kw, dict):
        raise GridError(f"{where}.env_kwargs must be a mapping of name -> value or list of values")
    if "data" in kw:
        raise GridError(f"{where}.env_kwargs: set the data directory with the top-level 'data:' key")
    kw = dict(kw)
    if "blind" in merged:
        if "blind" in kw:
            raise GridError(f"{where}: give blind either as 'blind:' or in env_kwargs, not both")
        kw["blind"] = merged["blind"]
    if "blind" in kw:
        values = kw["blind"] if isinstance(kw["blind"], list) else [kw["blind"]]
        if not values or not all(isinstance(v, bool) for v in values):
            raise GridError(f"{where}.blind: true, false or [false, true], got {kw['blind']!r}")
    seeds_raw = merged.get("seeds", [0])
    seeds = _as_list(seeds_raw, f"{where}.seeds") if seeds_raw is not None else [None]
    for s in seeds:
        if s is not None and (not isinstance(s, int) or isinstance(s, bool)):
            raise GridError(f"{where}.seeds: seeds must be integers, got {s!r}")
    opts = merged.get("agent_options") or {}
    if not isinstance(opts, dict):
        raise GridError(f"{where}.agent_options must be a mapping")
    _no_secrets(opts, f"{where}.agent_options")
    return {"agents": agents, "envs": envs, "env_kwargs": kw, "seeds": seeds or [0],
            "agent_options": dict(opts)}


def parse_grid(doc: Mapping[str, Any], default_name: str = "sweep") -> Grid:
    """Validate a grid document (the parsed YAML) and return a :class:`Grid`.

    Raises
    ------
    GridError
        Unknown keys, no agents / envs, non-integer seeds, non-mapping kwargs.
    """
    if not isinstance(doc, Mapping):
        raise GridError("a grid file must be a YAML mapping (agents:, envs:, env_kwargs:, seeds:)")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise GridError(f"unknown top-level key(s) {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    data = doc.get("data")
    if data is not None and not isinstance(data, str):
        raise GridError("data: must be a directory path or null")
    if "grids" in doc:
        raw_blocks = doc["grids"]
        if not isinstance(raw_blocks, list) or not raw_blocks:
            raise GridError("grids: must be a non-empty list of blocks")
        blocks = tuple(_block(b if isinstance(b, dict) else {}, doc, f"grids[{i}]") for i, b in enumerate(raw_blocks))
    else:
        blocks = (_block({k: v for k, v in doc.items() if k in _BLOCK_KEYS}, {}, "grid"),)
    return Grid(name=str(doc.get("name") or default_name), data=data, blocks=blocks)


def load_grid(path: str | Path) -> Grid:
    """Read a YAML grid file (PyYAML ``safe_load``) and parse it with :func:`parse_grid`."""
    import yaml

    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise GridError(f"{path}: not valid YAML ({exc})") from exc
    return parse_grid(doc or {}, default_name=path.stem)


def _scalar(text: str) -> Any:
    """A CLI value: YAML scalar semantics (``1`` int, ``0.5`` float, ``true`` bool, else str)."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def grid_from_flags(agents: Iterable[str], envs: Iterable[str], sets: Iterable[str] = (),
                    seeds: Iterable[int] = (0,), data: str | None = None, name: str = "sweep",
                    blind: bool = False) -> Grid:
    """Build a grid from CLI flags: ``--set period=covid_2020,china_2015`` gives a list of alternatives;
    ``blind`` (``--blind``) runs every run blind (``--set blind=false,true``: named and blind)."""
    kw: dict[str, Any] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise GridError(f"--set expects NAME=VALUE[,VALUE...], got {item!r}")
        vals = [_scalar(v.strip()) for v in value.split(",")]
        kw[key.strip()] = vals if len(vals) > 1 else vals[0]
    if blind:
        if "blind" in kw:
            raise GridError("give --blind or --set blind=..., not both")
        kw["blind"] = True
    return parse_grid({"name": name, "data": data, "agents": list(agents), "envs": list(envs), "env_kwargs": kw,
                       "seeds": list(seeds)})
