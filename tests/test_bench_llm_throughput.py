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


def test_episodes_groups_requests_in_the_order_sent():
    b = _bench()
    recs = [{"episode": e, "request": f"{e}{k}"} for k in (1, 2) for e in "ba"]  # two episodes interleaved
    recs.append({"episode": "c", "request": "c1"})
    assert b.episodes(recs) == [["b1", "b2"], ["a1", "a2"], ["c1"]]


def test_server_counters_per_pass_and_render():
    b = _bench()
    page = ("# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed\n"
            "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 1200\n"
            "llamacpp:prompt_tokens_cached_total 500\nllamacpp:prompt_seconds_total 12.5\n"
            "llamacpp:tokens_predicted_total 64\nllamacpp:tokens_predicted_seconds_total 2\n"
            "llamacpp:n_decode_total 70\nllamacpp:requests_processing 0\n")
    m0 = b.parse_metrics(page)
    assert m0["prompt_tokens_total"] == 1200.0 and "requests_processing" not in m0  # a gauge, not a counter
    m1 = {**m0, "prompt_tokens_total": 1224.0, "prompt_tokens_cached_total": 30500.0, "prompt_seconds_total": 13.0,
          "tokens_predicted_total": 448.0, "n_decode_total": 170.0}
    d = b.counters_delta(m0, m1)
    assert d == {"prompt_tokens": 24, "prompt_tokens_cached": 30000, "prompt_s": 0.5, "predicted_tokens": 384,
                 "predicted_s": 0.0, "decodes": 100}
    s = b.summarize([{"kind": "ceiling", "c": 4, "rates": {**b.rates(24, 384, 30024, 12.0), "server": d}},
                     {"kind": "quantgym", "c": 4, "rates": {**b.rates(24, 384, 30024, 12.5), "mean_latency_s": 2.0,
                                                            "server": {**d, "prompt_tokens": 30}}}], {}, 0.0)
    res = {"command": "python benchmarks/bench_llm_throughput.py", "commit": "abc1234",
           "measured_utc": "2026-01-01 00:00", "load_avg": [1.0, 2.0], "cpus": 2,
           "versions": {"llama_server": "0.5.0", "model": "m.gguf"},
           "figures": {"summary": s, "passes": [{"kind": "ceiling", "c": 4, "rates": {"server": d}},
                                                {"kind": "quantgym", "c": 4,
                                                 "rates": {"server": {**d, "prompt_tokens": 30}}}],
                       "workload": {"server": "llama-server -np 4", "envs": "E", "periods": "P", "episodes": 8,
                                    "options": "--max-tokens 16", "calls": 24}}}
    text = " ".join(b.render(res).split("\n\n")[0].split())
    assert "by pass in run order: ceiling c=4 24 (0.5 s), quantgym -j 4 30 (0.5 s)." in text
    assert "30,000 to 30,000 tokens a pass" in text


def test_summary_averages_each_sides_passes():
    b = _bench()
    passes = [{"kind": "ceiling", "c": 4, "rates": b.rates(12, 192, 14000, 6.0)},
              {"kind": "quantgym", "c": 4, "rates": {**b.rates(12, 192, 14000, 4.0), "mean_latency_s": 1.0}},
              {"kind": "quantgym", "c": 4, "rates": {**b.rates(12, 192, 14000, 12.0), "mean_latency_s": 3.0}},
              {"kind": "ceiling", "c": 4, "rates": b.rates(12, 192, 14000, 12.0)}]
    s = b.summarize(passes, {"4": {"cpu_s": 2.2}}, startup_cpu_s=1.0)
    q = s["quantgym"]["4"]
    assert q["passes"] == 2 and q["calls"] == 12 and q["calls_per_s"] == 2.0 and q["mean_latency_s"] == 2.0
    assert s["ceiling"]["4"]["calls_per_s"] == 1.5 and abs(q["ratio"] - 2.0 / 1.5) < 1e-12
    assert abs(q["env_side"]["ms_per_call"] - 100.0) < 1e-9 and abs(q["env_side"]["share_of_model_time"] - 0.05) < 1e-12
