"""ChatEngine against a real local OpenAI-compatible server: structured output detection, retries,
timeouts, budget, cache, transcript, replay, one-line configuration errors."""

from __future__ import annotations

import json

import pytest

from quantgym.agents.llm.client import (
    ChatEngine, LLMConfig, LLMConfigError, ReplayEngine, ReplayMismatchError, canonical_hash, read_transcript,
)

MSG = [{"role": "user", "content": "say something"}]
SCHEMA = {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"],
                                  "additionalProperties": False}, "strict": True}


def engine(srv, tmp_path, name="t", api_key="test-key", **kw):
    cfg = LLMConfig(model=kw.pop("model", "test-model"), base_url=srv.base_url, timeout=kw.pop("timeout", 5.0),
                    retries=kw.pop("retries", 3), backoff_base=0.01, backoff_max=0.05, **kw)
    return ChatEngine(cfg, api_key=api_key, transcript=tmp_path / f"{name}.jsonl")


def test_structured_output_sent_when_supported(server, tmp_path):
    server.script('{"a": 1}')
    eng = engine(server, tmp_path)
    res = eng.chat(MSG, schema=SCHEMA)
    assert res.ok and res.text == '{"a": 1}' and res.structured
    req = server.requests[-1]
    assert req["response_format"] == {"type": "json_schema", "json_schema": SCHEMA}
    assert req["temperature"] == 0.0 and req["max_tokens"] == 8192 and "seed" not in req
    assert eng.state().structured is True


def test_fallback_when_response_format_unsupported_is_detected_once(server_no_rf, tmp_path):
    server_no_rf.script('{"a": 1}', '{"a": 2}')
    eng = engine(server_no_rf, tmp_path)
    r1 = eng.chat(MSG, schema=SCHEMA)
    r2 = eng.chat(MSG + [{"role": "user", "content": "again"}], schema=SCHEMA)
    assert r1.ok and r2.ok and not r1.structured and not r2.structured
    assert ["response_format" in r for r in server_no_rf.requests] == [True, False, False]
    _, calls = read_transcript(tmp_path / "t.jsonl")
    assert [c["error_kind"] for c in calls] == ["unsupported", None, None]
    assert calls[0]["unsupported"] == "response_format"


def test_429_then_success_and_5xx_retried(server, tmp_path):
    server.script({"status": 429, "message": "rate limited"}, {"status": 503, "message": "overloaded"}, "ok text")
    eng = engine(server, tmp_path)
    res = eng.chat(MSG)
    assert res.ok and res.text == "ok text"
    _, calls = read_transcript(tmp_path / "t.jsonl")
    assert [t["status"] for t in calls[0]["tries"]] == [429, 503, 200]


def test_timeout_then_success(server, tmp_path):
    server.script({"delay": 1.5, "content": "too late"}, "in time")
    eng = engine(server, tmp_path, timeout=0.5)
    res = eng.chat(MSG)
    assert res.ok and res.text == "in time"
    _, calls = read_transcript(tmp_path / "t.jsonl")
    assert calls[0]["tries"][0]["error"].startswith("timeout")


def test_persistent_failure_is_a_recorded_result_not_an_exception(server, tmp_path):
    server.script(*[{"status": 500, "message": "boom"}] * 3)
    eng = engine(server, tmp_path, retries=2)
    res = eng.chat(MSG)
    assert not res.ok and res.error_kind == "server" and "boom" in res.error
    _, calls = read_transcript(tmp_path / "t.jsonl")
    assert calls[0]["ok"] is False and len(calls[0]["tries"]) == 3


def test_wrong_key_and_unknown_model_are_one_line_errors(server, tmp_path):
    with pytest.raises(LLMConfigError) as e1:
        engine(server, tmp_path, name="k", api_key="wrong").chat(MSG)
    assert "authentication failed" in str(e1.value) and "\n" not in str(e1.value)
    with pytest.raises(LLMConfigError) as e2:
        engine(server, tmp_path, name="m", model="no-such-model").chat(MSG)
    assert "no-such-model" in str(e2.value) and "not found" in str(e2.value) and "\n" not in str(e2.value)


def test_budget_cache_usage_cost(server, tmp_path):
    server.script("one", "two")
    eng = engine(server, tmp_path, max_calls=2, price_in=1.0, price_out=2.0)
    a = eng.chat(MSG)
    b = eng.chat(MSG)  # identical request: served from the cache, no HTTP call
    assert b.cached and b.text == a.text == "one" and len(server.requests) == 1
    c = eng.chat(MSG, nonce=1)  # a different nonce is a new request
    assert c.text == "two" and len(server.requests) == 2
    d = eng.chat(MSG, nonce=2)
    assert not d.ok and d.error_kind == "budget" and len(server.requests) == 2
    u = eng.usage()
    assert u["calls"] == 2 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0
    assert u["cost_usd"] == pytest.approx((u["prompt_tokens"] * 1.0 + u["completion_tokens"] * 2.0) / 1e6)


def test_transcript_content_and_replay(server, tmp_path):
    server.script('{"a": 1}', "second")
    eng = engine(server, tmp_path)
    eng.set_episode("ep")
    r1 = eng.chat(MSG, schema=SCHEMA, meta={"stage": "S1"})
    r2 = eng.chat([{"role": "user", "content": "next"}])
    header, calls = read_transcript(tmp_path / "t.jsonl")
    raw = (tmp_path / "t.jsonl").read_text()
    assert "test-key" not in raw  # the key never reaches the transcript
    assert header["config"]["model"] == "test-model" and header["config"]["base_url"] == server.base_url
    c = calls[0]
    for key in ("hash", "request", "response", "usage", "latency_s", "model", "endpoint", "ts", "meta", "episode"):
        assert key in c
    assert c["hash"] == canonical_hash(c["request"], 0) and c["episode"] == "ep" and c["meta"] == {"stage": "S1"}
    assert c["response"]["choices"][0]["message"]["content"] == '{"a": 1}'
    server.stop()
    rep = ReplayEngine(tmp_path / "t.jsonl")
    q1 = rep.chat(MSG, schema=SCHEMA)
    q2 = rep.chat([{"role": "user", "content": "next"}])
    assert (q1.text, q1.usage, q2.text, q2.usage) == (r1.text, r1.usage, r2.text, r2.usage)
    with pytest.raises(ReplayMismatchError):
        rep.chat([{"role": "user", "content": "never asked"}])


def test_transcript_is_never_overwritten(server, tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"type": "header"}) + "\n")
    with pytest.raises(FileExistsError):
        engine(server, tmp_path)


def test_hash_substitutions():
    req = {"model": "m", "messages": [{"role": "user", "content": "file at /tmp/abc/x.csv"}]}
    req2 = {"model": "m", "messages": [{"role": "user", "content": "file at /tmp/zzz/x.csv"}]}
    assert canonical_hash(req) != canonical_hash(req2)
    assert canonical_hash(req, 0, (("/tmp/abc", "<W>"),)) == canonical_hash(req2, 0, (("/tmp/zzz", "<W>"),))


def test_max_tokens_adaptations(tmp_path):
    from .server import ScriptedServer

    srv = ScriptedServer(reject_params={
        "max_tokens": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                      "Use 'max_completion_tokens' instead.",
        "max_completion_tokens": "This model's maximum context length is 8192 tokens. However, you requested "
                                 "9000 tokens. Please reduce the length of the messages or completion."}).start()
    try:
        srv.script("fine")
        eng = engine(srv, tmp_path)
        res = eng.chat(MSG)
        assert res.ok and res.text == "fine"
        sent = [("max_tokens" in r, "max_completion_tokens" in r) for r in srv.requests]
        assert sent == [(True, False), (False, True), (False, False)]
        _, calls = read_transcript(tmp_path / "t.jsonl")
        assert [c["unsupported"] for c in calls[:2]] == ["max_tokens", "max_tokens_drop"]
    finally:
        srv.stop()


def test_price_table(tmp_path, server):
    from quantgym.agents.llm import make_openai_agent
    from quantgym.agents.llm.agents import price_for

    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"test-model": {"input": 2.0, "output": 4.0}, "*": {"input": 1, "output": 1}}))
    assert price_for("test-model", str(table)) == (2.0, 4.0)
    assert price_for("other", str(table)) == (1.0, 1.0)
    assert price_for("x", {}) == (None, None)
    with pytest.raises(ValueError, match="price table"):
        price_for("x", {"x": {"input": "cheap"}})
    agent = make_openai_agent("test-model", task="market_bench", base_url=server.base_url, api_key="test-key",
                              prices=str(table), transcript=False)
    assert (agent.engine.config.price_in, agent.engine.config.price_out) == (2.0, 4.0)
    with pytest.raises(ValueError, match="unknown LLM agent option"):
        make_openai_agent("test-model", task="market_bench", colour="blue", transcript=False)
    with pytest.raises(ValueError, match="unknown task"):
        make_openai_agent("test-model", task="chess", transcript=False)


def test_resume_from_a_crashed_transcript(server, tmp_path):
    server.script("first answer")
    eng = engine(server, tmp_path, name="crashed")
    eng.chat(MSG)
    path = tmp_path / "crashed.jsonl"
    with path.open("a") as fh:  # a crash in the middle of writing the next line
        fh.write('{"type": "call", "hash": "abc", "ok": tr')
    header, calls = read_transcript(path)
    assert len(calls) == 1 and calls[0]["text"] == "first answer"
    cfg = LLMConfig(model="test-model", base_url=server.base_url, retries=0)
    eng2 = ChatEngine(cfg, api_key="test-key", transcript=tmp_path / "resumed.jsonl", cache_from=[path])
    n = len(server.requests)
    res = eng2.chat(MSG)
    assert res.cached and res.text == "first answer" and len(server.requests) == n  # no new HTTP call
    _, calls2 = read_transcript(tmp_path / "resumed.jsonl")
    assert calls2[0]["cache_hit"] is True
