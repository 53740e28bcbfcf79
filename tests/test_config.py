"""quantgym.config.Config: every task config derives from it, round-trips through to_dict / from_dict
(also through JSON), rejects unknown keys, has a version; no two config classes share a name."""

from __future__ import annotations

import dataclasses
import importlib
import json

import pytest

from quantgym.config import Config

CONFIG_MODULES = (
    "quantgym.envs.portbench.config",
    "quantgym.envs.portbench.paper.config",
    "quantgym.envs.portbench.static_qa.config",
    "quantgym.envs.quant_arena.config",
    "quantgym.envs.market_bench.config",
)


def _all_config_classes() -> list[type[Config]]:
    for m in CONFIG_MODULES:
        importlib.import_module(m)
    out, todo = [], list(Config.__subclasses__())
    while todo:
        k = todo.pop()
        out.append(k)
        todo.extend(k.__subclasses__())
    return sorted((k for k in out if k.__module__.startswith("quantgym.")), key=lambda k: k.__qualname__)


def _instances(k: type[Config]) -> list[Config]:
    """The default instance, a non-default one where a field can change, and the shipped constants."""
    from quantgym.envs.market_bench import config as mb
    from quantgym.envs.portbench import config as pb
    from quantgym.models import ImportableModel

    shipped = [*pb.PERIODS.values(), *mb.SCHEDULED_ROUNDS, *mb.PAIRS_ROUNDS, *mb.DELTA_HEDGE_ROUNDS,
               *(r.book for r in mb.PAIRS_ROUNDS), *(r.delta for r in mb.DELTA_HEDGE_ROUNDS),
               ImportableModel("quantgym.envs.quant_arena.config:ArenaCostModel", {"commission_min": 7.0})]
    out = [x for x in shipped if type(x) is k]
    try:
        out.append(k())
    except TypeError:  # no defaults (a round, a period): the shipped ones above
        pass
    return out


CLASSES = _all_config_classes()


def test_every_task_config_class_is_found():
    names = {k.__name__ for k in CLASSES}
    assert {"PortBenchConfig", "PortBenchCostModel", "PortBenchScoringConfig", "PaperFidelity", "QAConfig",
            "ArenaConfig", "ArenaCostModel", "ArenaScoringConfig", "ArenaSandboxLimits", "ImpactModel",
            "ExecutionModel", "Windows", "MarketBenchConfig", "MarketBenchScoringConfig",
            "MarketBenchSandboxLimits"} <= names


def test_no_two_config_classes_share_a_name():
    from quantgym.sandbox import SandboxLimits

    names = [k.__name__ for k in CLASSES] + [SandboxLimits.__name__]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for old in ("CostModel", "ScoringConfig", "SandboxConfig"):
        for m in CONFIG_MODULES:
            assert not hasattr(importlib.import_module(m), old), (m, old)


@pytest.mark.parametrize("k", CLASSES, ids=lambda k: k.__name__)
def test_round_trip_frozen_and_versioned(k):
    objs = _instances(k)
    assert objs, f"no instance of {k.__name__} to test"
    for c in objs:
        assert k.from_dict(c.to_dict()) == c
        assert k.from_dict(json.loads(json.dumps(c.to_dict()))) == c  # lists back to tuples
        assert c.to_dict() == dataclasses.asdict(c)
        assert c.replace() == c
        f = dataclasses.fields(c)[0]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(c, f.name, getattr(c, f.name))
    assert isinstance(k.version, str) and k.version
    with pytest.raises(ValueError, match="unknown key 'no_such_field'"):
        k.from_dict({**objs[0].to_dict(), "no_such_field": 1})


def test_nested_from_dict_and_replace():
    from quantgym.envs.portbench.config import PortBenchConfig, PortBenchCostModel
    from quantgym.envs.quant_arena.config import ArenaConfig, ArenaCostModel

    c = ArenaConfig(cost=ArenaCostModel.off())
    back = ArenaConfig.from_dict(c.to_dict())
    assert isinstance(back.cost, ArenaCostModel) and back == c
    assert ArenaConfig.from_dict({"cost": {"enabled": False}}) == c  # missing keys keep defaults
    p = PortBenchConfig().replace(costs=PortBenchCostModel.off(), lookback=30)
    assert (p.lookback, p.costs.rate) == (30, 0.0)
    with pytest.raises(ValueError, match=r"^ArenaCostModel\.from_dict: unknown key 'bogus'"):
        ArenaConfig.from_dict({"cost": {"bogus": 1}})


def test_a_config_object_is_named_config_never_cfg():
    """One name for the config objects across the package: attributes, parameters and locals are ``config``
    (an env's ``config`` is what ``evaluate()`` records)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "quantgym"
    hits = [f"{p.relative_to(root.parent)}:{i}" for p in sorted(root.rglob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if re.search(r"\bcfg\b", line)]
    assert not hits, hits
