"""Ray backend on a local Ray started by the session fixture: identical results, one ray.put, RLlib registry."""

from __future__ import annotations

import json

import pytest

from quantgym.sweep.runner import read_record, run_sweep

pytest.importorskip("ray")


def _strip(rec: dict) -> dict:
    rec = dict(rec)
    rec.pop("timing")
    return rec


def test_ray_backend_equals_local_backend_bit_for_bit(ray_session, tmp_path, small_grid, local_sweep, pb_data,
                                                     monkeypatch):
    ray = ray_session
    puts = []
    real_put = ray.put
    monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(type(value).__name__) or real_put(value, **kw))
    out = run_sweep(small_grid, tmp_path, backend="ray", data=pb_data)
    assert out.failed == [] and len(out.executed) == 4
    # the market data went into the object store once, as one object, for all four tasks
    assert puts == ["PortBenchData"]
    assert out.backend_info["started_local"] is False  # reused the session's Ray
    for s in small_grid.expand():
        a = (local_sweep.out_dir / "runs" / f"{s.run_id}.json").read_text()
        b = (tmp_path / "runs" / f"{s.run_id}.json").read_text()
        assert json.dumps(_strip(json.loads(a)), sort_keys=True) == json.dumps(_strip(json.loads(b)), sort_keys=True)
    assert (local_sweep.out_dir / "summary.csv").read_bytes() == (tmp_path / "summary.csv").read_bytes()
    la = json.loads((local_sweep.out_dir / "results.json").read_text())["tasks"]
    lb = json.loads((tmp_path / "results.json").read_text())["tasks"]
    assert la == lb


def test_ray_backend_records_failures_and_resumes(ray_session, tmp_path, pb_data):
    from quantgym.sweep.grid import parse_grid

    grid = parse_grid({"agents": ["sixty_forty"], "envs": ["PortBench-Balanced-v0"],
                       "env_kwargs": {"period": ["covid_2020", "no_such_period"]}})
    first = run_sweep(grid, tmp_path, backend="ray", workers=1, data=pb_data)
    assert len(first.failed) == 1
    bad = read_record(tmp_path, first.failed[0])
    assert bad["error"]["type"] == "ValueError" and "no_such_period" in bad["error"]["message"]
    again = run_sweep(grid, tmp_path, backend="ray", data=pb_data, retry_failed=False)
    assert again.executed == [] and len(again.skipped) == 2


def test_register_envs_makes_every_id_buildable_in_a_ray_worker(ray_session):
    pytest.importorskip("ray.tune")
    from ray.tune.registry import ENV_CREATOR, _global_registry

    from quantgym.tasks import env_ids
    from quantgym.integrations.ray import EnvCreator, register_envs

    names = register_envs()
    assert names == env_ids()
    assert all(_global_registry.contains(ENV_CREATOR, n) for n in names)
    with pytest.raises(ValueError, match="not quantgym env ids"):
        register_envs(["CartPole-v1"])

    @ray_session.remote(num_cpus=1)
    def build(creator, config):  # runs in a worker process: no driver-side Gymnasium registry
        env = creator(config)
        obs, _ = env.reset(seed=0)
        out = (type(env.unwrapped).__name__, env.unwrapped.period.name, env.unwrapped.profile.name, sorted(obs)[:3])
        env.close()
        return out

    cls, period, profile, keys = ray_session.get(build.remote(EnvCreator("PortBench-Conservative-v0"),
                                                              {"period": "covid_2020"}))
    assert (cls, period, profile) == ("PortBenchEnv", "covid_2020", "conservative") and keys
