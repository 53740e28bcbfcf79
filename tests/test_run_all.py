"""benchmarks/run_all.py writes what its stages measured and nothing else (no timing is checked here)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run_all():
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "benchmarks" / "run_all.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _result(vectorbt: bool) -> dict:
    vb = {"rounds": 3, "qa": {"stocks": 800, "days": 242, "final_nav": 1.0}, "mb_rows": 1000,
          "times": {"qa_eval": 0.05, "qa_account": 0.04, "mb_scheduled": 1e-4, "mb_pairs": 6e-4, "mb_delta_hedge": 2e-4},
          "errors": {}, "vectorbt": None, "mb_orders": {k: {"n_walks": 9, "n_orders": 7, "n_fills": 8} for k in
                                                         ("scheduled", "pairs", "delta_hedge")}}
    vb["cpu_times"] = dict(vb["times"])
    if vectorbt:
        vb["times"].update(vbt_qa=0.1, vbt_mb_scheduled=5e-4, vbt_mb_pairs=5e-4, vbt_mb_delta_hedge=5e-4)
        vb["cpu_times"].update(vbt_qa=0.1, vbt_mb_scheduled=5e-4, vbt_mb_pairs=5e-4, vbt_mb_delta_hedge=5e-4)
        vb["vectorbt"] = {"vectorbt": "1.2.0", "numba": "0.68.1", "numpy": "2", "pandas": "2", "qa_first_call_s": 1.0,
                          "qa_final_value": 1.0}
    else:
        vb["errors"]["vectorbt"] = "benchmarks/.venv-peers/bin/python missing"
    return {"started": "s", "finished": "f", "load": [1.0, 2.0], "errors": {},
            "portbench": {"runs": 1, "errors": [], "qg": {"raw": 40_000.0, "vec8": None, "stagewise": 3000.0},
                          "peer": {}, "peer_versions": {}, "peer_errors": {"peers venv": "not found"}},
            "vectorbt": vb, "market_bench": None, "scaling": None}


def test_missing_figures_are_not_measured_never_numbers():
    ra = _run_all()
    rows = {r[0].split(",")[0]: r for r in ra.headline(_result(vectorbt=False))}
    raw = rows["PortBench raw allocation step"]
    assert raw[1] == "40.0 k steps/s" and raw[3] is None and "not measured" in raw[2] and raw[5] is True
    assert rows["PortBench batched vector env"][1] == "not measured"
    assert rows["PortBench stagewise S1+S2+S3 scored decision (3 sub-steps at the sub-step rate)"][1] == "1.0 ms"
    assert all(r[3] is None for r in rows.values())  # no peer figure: no ratio
    text = ra.render(_result(vectorbt=False), [])["perf-headline"]
    assert "not measured" in text and "missing" in text


def test_ratios_are_quantgym_speed_over_peer_speed():
    ra = _run_all()
    rows = {r[0].split(" (")[0]: r for r in ra.headline(_result(vectorbt=True))}
    qa = rows["Quant-Arena sealed-year evaluation"]
    assert qa[3] == 0.1 / 0.05 and qa[5] is False  # vectorbt CPU time / quantgym's; 50 ms, ratio 2: not met
    pairs = rows["Market-Bench pairs reference, 1,000-row book, 7 orders"]
    assert abs(pairs[3] - 5e-4 / 6e-4) < 1e-12 and pairs[5] is False  # the same orders: vectorbt's time / ours
    scheduled = rows["Market-Bench scheduled reference, 1,000-row book, 7 orders"]
    assert scheduled[3] == 5e-4 / 1e-4 and scheduled[5] is True
    blocks = ra.render(_result(vectorbt=True), ["--rounds", "3"])
    assert "python benchmarks/run_all.py --rounds 3" in blocks["perf-headline"]
    assert set(blocks) == {"perf-headline", "perf-scaling", "perf-pb-scaling", "perf-details"}
