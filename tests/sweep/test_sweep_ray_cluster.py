"""``quantgym sweep --backend ray --address`` on a real multi-node Ray cluster (several raylets on this machine,
tests/sweep/ray_cluster.py): runs spread over the worker nodes, each run records its node, the results equal
the local backend's, and a worker node killed mid-sweep loses no run (its run is retried on another node and
the summary says so)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from quantgym.sweep.grid import parse_grid  # noqa: E402
from quantgym.sweep.runner import run_sweep  # noqa: E402
from tests.sweep.ray_cluster import LocalRayCluster  # noqa: E402

#: runs long enough (daily decisions, optimiser baselines) that a node killed mid-sweep is busy with one
FAULT_GRID = {"name": "fault", "agents": ["min_variance", "cov_risk_parity"],
              "envs": ["PortBench-Balanced-v0"],
              "env_kwargs": {"period": ["2020-02-03:2020-04-30:daily", "2022-05-02:2022-07-29:daily",
                                        "2015-06-01:2015-08-31:daily", "2024-03-01:2024-05-31:daily"]}, "seeds": [0]}


@pytest.fixture(scope="module")
def cluster():
    if not Path(sys.executable).with_name("ray").exists():
        pytest.skip("no `ray` command beside this Python (the multi-node cluster is started with `ray start`)")
    c = LocalRayCluster()
    try:
        yield c.start({"w1": 1, "w2": 1})
    finally:
        c.stop()


def _sweep(cluster: LocalRayCluster, args: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "quantgym", "sweep", *args, "--backend", "ray", "--address",
                             cluster.address, "-q"], env=cluster.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def _runs(out) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))}


def _plain(rec: dict) -> str:
    rec = {k: v for k, v in rec.items() if k not in ("timing", "retries")}
    return json.dumps(rec, sort_keys=True)


def test_sweep_spreads_over_the_nodes_records_them_and_equals_the_local_backend(cluster, tmp_path, small_grid,
                                                                                 local_sweep):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(small_grid.to_dict()))
    p = _sweep(cluster, [str(grid), "-o", str(tmp_path / "ray")])
    text, _ = p.communicate(timeout=600)
    assert p.returncode == 0, text
    out = tmp_path / "ray"
    recs = _runs(out)
    local = _runs(local_sweep.out_dir)
    assert set(recs) == set(local) and len(recs) == 4
    assert all(_plain(recs[k]) == _plain(local[k]) for k in recs)
    assert (out / "summary.csv").read_bytes() == (local_sweep.out_dir / "summary.csv").read_bytes()
    meta = json.loads((out / "results.json").read_text())["meta"]
    nodes = meta["backend_info"]["nodes"]
    workers = {n: v for n, v in nodes.items() if v["resources"]}
    assert sorted(v["resources"][0] for v in workers.values()) == ["qg_w1", "qg_w2"]
    assert all(v["alive"] for v in nodes.values()) and len(nodes) == 3
    used = {r["timing"]["node"] for r in recs.values()}
    assert used == set(workers), "every run on a worker node (the head has no CPU), both worker nodes used"
    assert meta["n_retried"] == 0 and not any("retries" in r for r in recs.values())
    assert "Ray: 4 runs on 2 of 3 nodes" in " ".join(text.split())


def test_a_worker_node_killed_mid_sweep_loses_no_run(cluster, tmp_path, pb_data):
    cluster.add_node("w3", 1)
    cluster.wait_nodes(4, 120)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(FAULT_GRID))
    out = tmp_path / "ray"
    p = _sweep(cluster, [str(grid), "-o", str(out)])
    # three nodes of 1 CPU, eight runs of a second or more each. w3 runs nothing before the sweep, so the first
    # poll that sees its worker titled with the task is within a poll of that run's start: w3 is killed there,
    # mid-way through its first run (a later kill could land as a run hands back its result, and lose nothing)
    end = time.monotonic() + 600
    while not cluster.running("w3", "execute_ray_run"):
        assert p.poll() is None and time.monotonic() < end, p.communicate()[0] if p.poll() is not None else "timeout"
        time.sleep(0.02)
    cluster.kill("w3")
    text, _ = p.communicate(timeout=600)
    assert p.returncode == 0, text
    recs = _runs(out)
    assert len(recs) == 8 and all(r["status"] == "ok" for r in recs.values()), text
    meta = json.loads((out / "results.json").read_text())["meta"]
    nodes = meta["backend_info"]["nodes"]
    w3 = next(n for n, v in nodes.items() if v["resources"] == ["qg_w3"])
    assert nodes[w3]["alive"] is False
    retried = {k: r for k, r in recs.items() if "retries" in r}
    where = {k: r["timing"]["node"][:8] for k, r in recs.items()}
    assert retried, f"no run retried after killing w3 ({w3[:8]}); runs by node: {where}; output: {text[-1500:]}"
    assert meta["n_retried"] == len(retried) == len(meta["backend_info"]["retried"])
    for r in retried.values():
        assert r["timing"]["node"] != w3 and r["retries"][0]["type"]  # finished elsewhere; the failure is kept
    flat = " ".join(text.split())
    assert f"{len(retried)} run(s) retried after a worker or node died" in flat and "dead nodes: " + w3[:8] in flat
    # nothing lost, nothing changed: the same rows as the local backend
    local = run_sweep(parse_grid(FAULT_GRID), tmp_path / "local", backend="local", workers=2, data=pb_data)
    assert local.failed == []
    assert (out / "summary.csv").read_bytes() == (tmp_path / "local" / "summary.csv").read_bytes()
    lrecs = _runs(tmp_path / "local")
    assert all(_plain(recs[k]) == _plain(lrecs[k]) for k in recs)
