"""benchmarks/bench_llm_throughput.py computes its figures from what it measured (no timing is checked here)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_llm_throughput",
                                                  ROOT / "benchmarks" / "bench_llm_throughput.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _call(ts: str, latency: float, prompt: int, completion: int) -> dict:
    return {"type": "call", "ok": True, "ts": ts, "latency_s": latency,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def test_transcript_rates_span_from_first_request_to_last_answer():
    b = _bench()
    recs = [_call("2026-01-01T00:00:02.000+00:00", 2.0, 1000, 16),  # sent at 0 s
            _call("2026-01-01T00:00:04.000+00:00", 1.0, 1200, 16)]  # answered at 4 s
    r = b.transcript_rates(recs)
    assert r["seconds"] == 4.0 and r["calls"] == 2
    assert r["calls_per_s"] == 0.5 and r["completion_tok_per_s"] == 8.0 and r["prompt_tok_per_s"] == 550.0
    assert r["mean_latency_s"] == 1.5 and r["failed"] == 0


def test_summary_ratio_env_side_and_render():
    b = _bench()
    passes = [{"kind": "ceiling", "c": 4, "rates": b.rates(10, 160, 12000, 5.0)},
              {"kind": "ceiling", "c": 4, "rates": b.rates(10, 160, 12000, 10.0)},
              {"kind": "ceiling", "c": 1, "rates": b.rates(10, 160, 12000, 10.0)},
              {"kind": "quantgym", "c": 4,
               "rates": {**b.rates(10, 160, 12000, 8.0), "mean_latency_s": 2.0}},
              {"kind": "quantgym", "c": 1, "rates": {**b.rates(10, 160, 12000, 12.5), "mean_latency_s": 1.0}}]
    s = b.summarize(passes, {"4": {"cpu_s": 3.0}, "1": {"cpu_s": 2.0}}, startup_cpu_s=1.0)
    assert s["ceiling"]["4"]["calls_per_s"] == 1.5 and s["ceiling"]["4"]["passes"] == 2  # (2 + 1) / 2
    q4, q1 = s["quantgym"]["4"], s["quantgym"]["1"]
    assert abs(q4["ratio"] - 1.25 / 1.5) < 1e-12 and q1["ratio"] == 0.8
    assert abs(q4["env_side"]["ms_per_call"] - 200.0) < 1e-9 and abs(q4["env_side"]["share_of_model_time"] - 0.1) < 1e-12
    assert abs(q1["env_side"]["ms_per_call"] - 100.0) < 1e-9
    res = {"command": "python benchmarks/bench_llm_throughput.py", "commit": "abc1234",
           "measured_utc": "2026-01-01 00:00", "load_avg": [1.0, 2.0], "cpus": 2,
           "versions": {"llama_server": "0.5.0", "model": "m.gguf"},
           "figures": {"summary": s, "workload": {"server": "llama-server -np 4", "envs": "E", "periods": "P",
                                                  "episodes": 9, "options": "--max-tokens 16", "calls": 10}}}
    text = b.render(res)
    assert "| ceiling c=4 | 1.50 | 24.0 | 1,800 | 1.00 | | |" in text
    assert "| quantgym -j 4 | 1.25 | 20.0 | 1,500 | 0.83 | 200.0 | 10.0 % |" in text
    assert "| quantgym -j 1 | 0.80 | 12.8 | 960 | 0.80 | 100.0 | 10.0 % |" in text
    assert "c=8" not in text  # a concurrency not measured has no row
    assert all(len(line) <= 80 for line in text.splitlines() if not line.startswith("|"))


def test_lockstep_orders_requests_as_c_episodes_in_flight_send_them():
    b = _bench()
    recs = [{"episode": e, "request": f"{e}{k}"} for e in "abc" for k in (1, 2)]
    assert b.lockstep(recs, 1) == ["a1", "a2", "b1", "b2", "c1", "c2"]
    assert b.lockstep(recs, 2) == ["a1", "b1", "a2", "b2", "c1", "c2"]
    assert b.lockstep(recs, 8) == ["a1", "b1", "c1", "a2", "b2", "c2"]
