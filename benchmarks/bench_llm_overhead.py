"""Overhead of the LLM-agent machinery (no model): parsing, the HTTP round trip through the official
openai client to a local scripted server (with the fsynced transcript), replay, and the thread-pool
speed-up of ``run_eval`` when every call has a fixed latency.

Run: ``python benchmarks/bench_llm_overhead.py [--latency 0.2]`` (needs the ``openai`` package).
The local server is ``tests/llm/server.py``; answers are the scripted valid PortBench answers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import quantgym  # noqa: E402,F401
from quantgym.agents.llm.client import ChatEngine, LLMConfig  # noqa: E402
from quantgym.agents.llm.replay import ReplayEngine  # noqa: E402
from quantgym.envs.portbench.coercion import COERCERS  # noqa: E402
from quantgym.envs.portbench.parsing import extract_json  # noqa: E402
from quantgym.agents.registry import make_eval_agents  # noqa: E402
from quantgym.plan import EvalPlan, run_eval  # noqa: E402
from quantgym.envs.portbench.text_protocol import TextStageAction  # noqa: E402
from tests.llm import pb_script as S  # noqa: E402
from tests.llm.server import ScriptedServer  # noqa: E402


def best(fn, repeat=5):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.2, help="server delay per call for the concurrency test (s)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="qg-llm-bench-"))

    # 1. parsing + coercion of real-size stage answers (normal_2024, first date)
    env = TextStageAction(gym.make("PortBench-Balanced-v0", period="normal_2024", stagewise=True))
    obs, _ = env.reset(seed=0)
    tick, avail = env.unwrapped.view.tickers, np.asarray(obs["available"], bool)
    answers = []
    for _ in range(3):
        req = {"messages": [{"role": "user", "content": obs["prompt"]}]}
        answers.append((int(obs["stage"]), S.valid(req), S.fenced(req), S.truncated(req)))
        obs, *_ = env.step(S.valid(req))
    for stage, valid, fenced, trunc in answers:
        for kind, text in (("valid", valid), ("fenced", fenced), ("truncated", trunc)):
            n = 200
            t = best(lambda: [COERCERS[stage](extract_json(text).obj, tick, avail) for _ in range(n)])
            print(f"parse+coerce S{stage + 1} {kind:9s} ({len(text):5d} chars): {1e6 * t / n:8.1f} us")

    # 2. round trip through the openai client + fsynced transcript, and replay
    srv = ScriptedServer().start()
    srv.responder = lambda req: '{"a": 1}'
    eng = ChatEngine(LLMConfig(model="test-model", base_url=srv.base_url), api_key="test-key",
                     transcript=tmp / "rt.jsonl")
    n = 200
    msgs = [[{"role": "user", "content": f"question {i} " + "x" * 2000}] for i in range(n)]
    eng.chat(msgs[0], nonce=-1)  # warm the connection
    t = time.perf_counter()
    for m in msgs:
        eng.chat(m)
    live = (time.perf_counter() - t) / n
    rep = ReplayEngine(tmp / "rt.jsonl")
    rep.chat(msgs[0], nonce=-1)
    t = time.perf_counter()
    for m in msgs:
        rep.chat(m)
    replay = (time.perf_counter() - t) / n
    print(f"live call via openai client to 127.0.0.1 (+ transcript fsync): {1e3 * live:.2f} ms/call; "
          f"replay: {1e3 * replay:.3f} ms/call (n={n})")

    # 3. concurrency: 3 profiles x normal_2024 (36 calls each) with a fixed server latency
    srv.responder = lambda req: {"delay": args.latency, "content": S.valid(req)}
    plan = EvalPlan(env_ids=["PortBench-Conservative-v0", "PortBench-Balanced-v0", "PortBench-Aggressive-v0"],
                    options={"periods": ["normal_2024"], "baseline": False}, plots=False)
    for conc in (1, 4):
        t = time.perf_counter()
        agents, _ = make_eval_agents("openai:test-model", plan, tmp / f"c{conc}",
                                     {"base_url": srv.base_url, "api_key": "test-key"})
        secs = run_eval(agents, plan, tmp / f"c{conc}", concurrency=conc, own_agents=True)
        wall = time.perf_counter() - t
        calls = secs[0].extra["usage"]["calls"]
        print(f"run_eval 3 PortBench episodes, {calls} calls at {args.latency:g} s latency, concurrency {conc}: "
              f"{wall:.1f} s")
    srv.stop()
    print(json.dumps({"tmp": str(tmp)}))


if __name__ == "__main__":
    main()
