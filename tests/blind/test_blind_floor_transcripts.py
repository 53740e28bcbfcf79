"""The blind floor's shipped transcripts (examples/llm_floor/blind/, docs/blind.md "The floor, blind"):
recorded against a real llama.cpp server with SmolLM2-135M-Instruct, replayed here offline.

- ``quant_arena-oneshot.jsonl.gz``: ``quantgym eval --env QuantArena-OneShot-v0 --blind both``; replayed with
  ``--blind`` (its blind episode: the Quant-Arena eval end to end in blind mode) it gives the scores the live
  run wrote (``quant_arena-oneshot.scores.json``) bit for bit;
- every prompt of the blind episodes of every shipped transcript is clean for the leak scanner
  (:func:`quantgym.blind.scan` with the bundled vocabulary), and their named twins are not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quantgym.agents.llm.client import read_transcript
from quantgym.cli import app

BLIND = Path(__file__).resolve().parents[2] / "examples" / "llm_floor" / "blind"
QA = BLIND / "quant_arena-oneshot.jsonl.gz"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"no shipped transcript {path.name}")
    return path


def test_quant_arena_blind_replay_reproduces_the_recorded_scores(tmp_path):
    src = _need(QA)
    header, calls = read_transcript(src)
    assert header["eval"]["blind_both"] is True
    blind_calls = [c for c in calls if "blind" in str(c.get("episode"))]
    assert blind_calls
    out = tmp_path / "r"
    r = CliRunner().invoke(app, ["eval", "--agent", f"replay:{src}", "--env", ",".join(header["eval"]["env_ids"]),
                                 "--blind", "--out", str(out), "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    runs = json.loads((out / "results.json").read_text())["tasks"]["quant_arena"]["runs"]
    want = [r for r in json.loads((BLIND / "quant_arena-oneshot.scores.json").read_text())["runs"] if r["blind"]]
    got = []
    for run in runs:
        f = run["final"]
        assert f["blind"] is True
        got.append({"env_id": run["env_id"], "track": run["track"], "blind": True, "S": run["S"],
                    **{k: f.get(k) for k in ("S", "S_in", "S_out", "frozen_candidate", "source_sha256",
                                             "status_research", "status_sealed")},
                    "feedback": [{"candidate": x.get("candidate"), "reward": x.get("reward"), "status": x.get("status")}
                                 for x in run.get("feedback") or []]})
    assert got == want  # floats compared exactly (JSON keeps every bit of a float)
    usage = [run["usage"] for run in runs]
    assert sum(u["calls"] for u in usage) == len(blind_calls) and all(u["cache_hits"] == 0 for u in usage)


def _blind_prompts() -> list[tuple[str, str]]:
    out = []
    for f in sorted(BLIND.glob("*.jsonl.gz")):
        _, calls = read_transcript(f)
        for c in calls:
            if "blind" not in str(c.get("episode")):  # the named episodes of a --blind both run
                continue
            for m in c["request"]["messages"]:
                out.append((f"{f.name} {c['episode']} {m['role']}", str(m.get("content") or "")))
    return out


def test_every_prompt_of_the_blind_transcripts_is_clean_for_the_scanner():
    _need(QA)
    from quantgym.blind import bundled_vocabulary

    prompts = _blind_prompts()
    n_blind = sum("blind" in str(c.get("episode")) for c in read_transcript(QA)[1])
    assert len(prompts) >= 2 * n_blind  # the system and the user message of every blind call
    vocab = bundled_vocabulary()
    leaks = {where: found for where, text in prompts if (found := vocab.scan(text))}
    assert leaks == {}


def test_the_scanner_finds_the_named_episodes_of_a_blind_both_transcript():
    """The check above looks at something: the named twins of the blind episodes do leak."""
    from quantgym.blind import bundled_vocabulary

    both = [f for f in sorted(BLIND.glob("*.jsonl.gz")) if read_transcript(f)[0]["eval"].get("blind_both")]
    if not both:
        pytest.skip("no shipped --blind both transcript")
    vocab = bundled_vocabulary()
    for f in both:
        named = [m["content"] for c in read_transcript(f)[1] if "blind" not in str(c.get("episode"))
                 for m in c["request"]["messages"] if m["role"] == "user"]
        assert named and any(vocab.scan(text) for text in named), f.name


def test_the_portbench_floor_replays_one_episode_at_a_time_to_the_recorded_gap(tmp_path):
    """The recording ran both views at once (-j 4) and the blind episode met the server's json_schema refusal
    first; replayed with -j 1 the named episode asks first, gets the recorded refusal (an endpoint's answer to
    the rung, quantgym.agents.llm.replay) and steps down as the run did: the same scores and the same gap."""
    import csv

    src = _need(BLIND / "portbench.jsonl.gz")
    _, calls = read_transcript(src)
    refused = [c for c in calls if c.get("error_kind") == "unsupported"]
    assert len(refused) == 1 and "/blind#" in refused[0]["episode"]  # the order the replay does not follow
    out = tmp_path / "r"
    r = CliRunner().invoke(app, ["eval", "--agent", f"replay:{src}", "-j", "1", "--no-baseline", "--out", str(out),
                                 "--no-plots", "-q"])
    assert r.exit_code == 0, r.output
    named, blind = list(csv.DictReader(open(out / "summary.csv")))
    assert (round(float(named["sharpe"]), 3), round(float(blind["sharpe"]), 3)) == (0.600, -0.027)
    assert round(float(blind["gap_sharpe"]), 3) == -0.627 and blind["likely_recall"] == "false"
    pb = json.loads((out / "results.json").read_text())["tasks"]["portbench"]
    assert pb["usage"]["calls"] == len(calls)  # every recorded call replayed once, the refusal included
    assert [run["usage"].get("adaptations", 0) for run in pb["runs"]] == [1, 0]  # met by the named episode this time
