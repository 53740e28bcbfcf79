"""ChatEngine against a real local OpenAI-compatible server: structured output detection, retries,
timeouts, budget, cache, transcript, replay, one-line configuration errors."""

from __future__ import annotations

import json

import pytest

from quantgym.agents.llm.client import (
    ChatEngine, LLMConfig, LLMConfigError, ReplayMismatchError, canonical_hash, read_transcript,
)
from quantgym.agents.llm.replay import ReplayEngine

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
    # max_tokens="auto" with no cap from the caller: no cap sent
    assert req["temperature"] == 0.0 and "max_tokens" not in req and "seed" not in req
    assert eng.state().structured is True and res.rung == "json_schema"


def test_fallback_when_response_format_unsupported_is_detected_once(server_no_rf, tmp_path):
    server_no_rf.script('{"a": 1}', '{"a": 2}')
    eng = engine(server_no_rf, tmp_path)
    r1 = eng.chat(MSG, schema=SCHEMA)
    r2 = eng.chat(MSG + [{"role": "user", "content": "again"}], schema=SCHEMA)
    assert r1.ok and r2.ok and not r1.structured and not r2.structured
    # one request per rung the server refuses (json_schema, json_object + schema, json_object), then text
    assert ["response_format" in r for r in server_no_rf.requests] == [True, True, True, False, False]
    _, calls = read_transcript(tmp_path / "t.jsonl")
    assert [c["error_kind"] for c in calls] == ["unsupported"] * 3 + [None, None]
    assert [c["rung"] for c in calls] == ["json_schema", "json_object_schema", "json_object", "text", "text"]
    assert all(c["unsupported"] == "response_format" and c["adapted"] for c in calls[:3])


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


@pytest.mark.parametrize("choices", [[], None])
def test_http_200_without_choices_is_a_failed_call_not_an_empty_answer(server, tmp_path, choices):
    # a body without choices (a proxy's error sent as 200) is not the model's answer "" (cached, scored)
    server.script({"choices": choices}, "the real answer")
    eng = engine(server, tmp_path, retries=2)
    res = eng.chat(MSG)
    assert not res.ok and res.text is None and res.error_kind == "status" and "without choices" in res.error
    _, calls = read_transcript(tmp_path / "t.jsonl")
    assert calls[0]["ok"] is False and calls[0]["response"]["choices"] == choices
    again = eng.chat(MSG)  # nothing was cached: the next call asks the server again
    assert again.ok and again.text == "the real answer"


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
        res = eng.chat(MSG, max_tokens=8192)
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
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a crash's cut last line is expected: no warning
        header, calls = read_transcript(path)
    assert len(calls) == 1 and calls[0]["text"] == "first answer"
    corrupt = tmp_path / "corrupt.jsonl"
    lines = path.read_text().splitlines()
    corrupt.write_text("\n".join([lines[0], '{"type": "ca', *lines[1:-1]]) + "\n")
    with pytest.warns(RuntimeWarning, match=r"1 line\(s\) that are not JSON were skipped \(line 2\)"):
        read_transcript(corrupt)
    cfg = LLMConfig(model="test-model", base_url=server.base_url, retries=0)
    eng2 = ChatEngine(cfg, api_key="test-key", transcript=tmp_path / "resumed.jsonl", cache_from=[path])
    n = len(server.requests)
    res = eng2.chat(MSG)
    assert res.cached and res.text == "first answer" and len(server.requests) == n  # no new HTTP call
    _, calls2 = read_transcript(tmp_path / "resumed.jsonl")
    assert calls2[0]["cache_hit"] is True


# ---------------------------------------------------------------- capability ladder and context window
from llm.server import ScriptedServer  # noqa: E402

from quantgym.agents.llm.client import RUNGS, parse_context_error  # noqa: E402


@pytest.mark.parametrize("accepted, status", [
    ({"json_schema"}, 400), ({"json_object_schema"}, 500), ({"json_object"}, 422), (set(), 500)])
def test_ladder_steps_down_one_request_per_refused_rung(tmp_path, accepted, status):
    srv = ScriptedServer(accept_rf=accepted, rf_status=status).start()
    try:
        srv.responder = lambda req: '{"a": 1}'
        eng = engine(srv, tmp_path, retries=5)
        first = next(i for i, r in enumerate(RUNGS) if r in accepted or r == "text")
        r1 = eng.chat(MSG, schema=SCHEMA)
        r2 = eng.chat(MSG + [{"role": "user", "content": "again"}], schema=SCHEMA)
        assert r1.ok and r2.ok and r1.rung == r2.rung == RUNGS[first]
        # a refused rung costs exactly one request, even as HTTP 500 (never the retry loop)
        assert len(srv.requests) == first + 2
        _, calls = read_transcript(tmp_path / "t.jsonl")
        assert [c["rung"] for c in calls] == list(RUNGS[:first + 1]) + [RUNGS[first]]
        assert all(len(c["tries"]) == 1 for c in calls)
        if RUNGS[first] == "json_object_schema":
            assert srv.requests[-1]["response_format"] == {"type": "json_object", "schema": SCHEMA["schema"]}
        # the replay takes the same path without a server
        srv.stop()
        rep = ReplayEngine(tmp_path / "t.jsonl")
        q1 = rep.chat(MSG, schema=SCHEMA)
        assert q1.text == r1.text and q1.rung == r1.rung
    finally:
        srv.stop()


def test_fixed_rung_is_not_climbed_down(server_no_rf, tmp_path):
    eng = engine(server_no_rf, tmp_path, structured="json_object")
    res = eng.chat(MSG, schema=SCHEMA)
    assert not res.ok and res.error_kind == "unsupported" and len(server_no_rf.requests) == 1
    assert server_no_rf.requests[0]["response_format"] == {"type": "json_object"}


def test_parse_context_error_wordings():
    assert parse_context_error("This model's maximum context length is 4096 tokens. However, you requested 5091 "
                               "tokens (5031 in the messages, 60 in the completion).") == (4096, 5031)
    assert parse_context_error('{"type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}') \
        == (8192, 9000)
    assert parse_context_error("Requested tokens (13200) exceed context window of 8192") == (8192, 13200)
    assert parse_context_error("request (9000 tokens) exceeds the available context size (8192 tokens)") == (8192, 9000)
    assert parse_context_error("the request exceeds the available context size") == (None, None)
    assert parse_context_error("temperature must be <= 2") is None


def test_context_error_teaches_window_and_refit_resends_once(tmp_path):
    srv = ScriptedServer(context_window=300).start()
    try:
        srv.responder = lambda req: "fits"
        eng = engine(srv, tmp_path)
        big = [{"role": "user", "content": "x" * 4000}]  # 1000 "tokens" at the server's count
        seen = []

        def refit(window, needed):
            seen.append((window, needed))
            return [{"role": "user", "content": "x" * 400}], 50, {"prompt_style": "minimal"}

        res = eng.chat(big, max_tokens=100, refit=refit)
        assert res.ok and res.text == "fits" and seen == [(300, 1000)]
        assert eng.context_window() == 300 and eng.context_source() == "error"
        _, calls = read_transcript(tmp_path / "t.jsonl")
        assert [c["error_kind"] for c in calls] == ["context", None]
        assert calls[0]["adapted"] and calls[1]["meta"] == {"prompt_style": "minimal", "refit": True}
        assert eng.episode_stats == {} and eng.usage()["calls"] == 2
        # without refit: a recorded failure of kind "context", not retried
        bad = eng.chat(big, max_tokens=100)
        assert not bad.ok and bad.error_kind == "context" and bad.context_window == 300
        assert len(srv.requests) == 3
    finally:
        srv.stop()


def test_metadata_probe_reads_max_model_len_and_is_recorded(tmp_path):
    srv = ScriptedServer(models_meta={"max_model_len": 2048}).start()
    try:
        eng = engine(srv, tmp_path)
        assert eng.probe_context_window() == 2048 and eng.context_source() == "metadata:models.max_model_len"
        header, _ = read_transcript(tmp_path / "t.jsonl")
        assert header["_probes"][0]["context_window"] == 2048
        srv.stop()
        rep = ReplayEngine(tmp_path / "t.jsonl")  # the replay reads the recorded probe, no network
        assert rep.probe_context_window() == 2048
    finally:
        srv.stop()


def test_truncated_prompt_is_a_recorded_warning(tmp_path):
    srv = ScriptedServer().start()
    try:
        srv.responder = lambda req: {"content": "ok"}
        eng = engine(srv, tmp_path)
        # the scripted server counts characters / 4: not a truncation
        assert eng.chat([{"role": "user", "content": "y" * 8000}]).warning is None
        srv.responder = lambda req: {"content": "ok", "prompt_tokens": 100}  # Ollama-style cut to num_ctx
        res = eng.chat([{"role": "user", "content": "z" * 8000}])
        assert res.ok and "truncated" in res.warning
        _, calls = read_transcript(tmp_path / "t.jsonl")
        assert "truncated" in calls[-1]["warning"]
    finally:
        srv.stop()


def test_cache_from_an_earlier_run_keeps_its_latency(server, tmp_path):
    server.script({"delay": 0.2, "content": "earlier answer"})
    eng = engine(server, tmp_path, name="a")
    first = eng.chat(MSG)
    eng.transcript.close()
    cfg = LLMConfig(model="test-model", base_url=server.base_url, timeout=5.0)
    eng2 = ChatEngine(cfg, api_key="test-key", transcript=tmp_path / "b.jsonl", cache_from=[tmp_path / "a.jsonl"])
    again = eng2.chat(MSG)  # not sent: answered from the earlier run
    assert again.cached and again.text == first.text == "earlier answer" and len(server.requests) == 1
    _, calls = read_transcript(tmp_path / "b.jsonl")
    assert calls[0]["cache_hit"] and calls[0]["cache_source"] == "cache_from"
    assert calls[0]["cached_latency_s"] >= 0.2
    eng2.chat(MSG)  # a second identical request: still the earlier run's answer
    _, calls = read_transcript(tmp_path / "b.jsonl")
    assert calls[1]["cache_source"] == "cache_from"
    eng2.transcript.close()
    # a resume of the resumed run still has the first run's answer and latency
    eng3 = ChatEngine(cfg, api_key="test-key", transcript=tmp_path / "c.jsonl", cache_from=[tmp_path / "b.jsonl"])
    third = eng3.chat(MSG)
    assert third.cached and third.text == "earlier answer" and len(server.requests) == 1
    _, calls = read_transcript(tmp_path / "c.jsonl")
    assert calls[0]["cache_source"] == "cache_from" and calls[0]["cached_latency_s"] >= 0.2


def test_stale_refusal_does_not_skip_a_rung(tmp_path):
    """Two threads refused at the same rung step down once, not twice (compare-and-set)."""
    cfg = LLMConfig(model="m", base_url="http://127.0.0.1:9/v1")
    eng = ChatEngine(cfg, api_key="k", transcript=None)
    req0 = eng.build_request(MSG, SCHEMA)
    assert eng._adapt("response_format", req0) and RUNGS[eng.state().rung] == "json_object_schema"
    assert eng._adapt("response_format", req0)  # stale: resend at the current rung, no second step
    assert RUNGS[eng.state().rung] == "json_object_schema"


def test_generic_5xx_naming_response_format_is_retried_once_the_rung_is_known(server, tmp_path):
    server.script('{"a": 1}', {"status": 503, "message": "overloaded while decoding (response_format=json_schema)"},
                  '{"a": 2}')
    eng = engine(server, tmp_path)
    assert eng.chat(MSG, schema=SCHEMA).rung == "json_schema"
    res = eng.chat(MSG + [{"role": "user", "content": "more"}], schema=SCHEMA)
    assert res.ok and res.text == '{"a": 2}' and res.rung == "json_schema"
    _, calls = read_transcript(tmp_path / "t.jsonl")
    assert [t["status"] for t in calls[1]["tries"]] == [503, 200]


def test_context_error_sent_as_500_is_a_context_error(server, tmp_path):
    server.script({"status": 500, "message": "Requested tokens (9000) exceed context window of 4096"})
    eng = engine(server, tmp_path)
    res = eng.chat(MSG, max_tokens=10)
    assert not res.ok and res.error_kind == "context" and len(server.requests) == 1
    assert eng.context_window() == 4096


def test_unnumbered_context_error_bounds_the_window_and_no_identical_resend(tmp_path):
    from quantgym.evaluation import evaluate
    from quantgym.agents.llm import make_openai_agent

    from . import pb_script as S
    from .server import fast_options

    srv = ScriptedServer(context_window=4096, context_message="the request exceeds the available context size").start()
    try:
        srv.responder = S.valid
        agent = make_openai_agent("test-model", task="portbench", **fast_options(srv, tmp_path, "b"))
        evaluate("PortBench-Balanced-v0", agent, period={"start": "2020-03-02", "end": "2020-03-13", "freq": "weekly"})
        _, calls = read_transcript(tmp_path / "b.jsonl")
        kinds = [c["error_kind"] for c in calls]
        # each unnumbered error bounds the window lower (at most one per prompt style), none is a failure
        assert agent.engine.context_source() == "error-bound"
        assert kinds.count("context") <= 3 and agent.episode_usage()["failures"] == 0
        hashes = [c["hash"] for c in calls if c["error_kind"] == "context"]
        assert len(hashes) == len(set(hashes))  # never the same failing request twice
    finally:
        srv.stop()


def test_fixed_cap_is_sent_as_given_and_none_still_reserves_room(tmp_path):
    from quantgym.evaluation import evaluate
    from quantgym.agents.llm import make_openai_agent

    from . import pb_script as S
    from .server import fast_options

    srv = ScriptedServer().start()
    try:
        srv.responder = S.valid
        period = {"start": "2020-03-02", "end": "2020-03-06", "freq": "weekly"}
        for name, mt in (("n", 4000), ("none", None)):
            agent = make_openai_agent("test-model", task="portbench",
                                      **fast_options(srv, tmp_path, name, context_window=4096, max_tokens=mt))
            evaluate("PortBench-Balanced-v0", agent, period=period)
            _, calls = read_transcript(tmp_path / f"{name}.jsonl")
            for c in calls:
                assert c["request"].get("max_tokens") == mt and c["meta"]["max_tokens"] == mt
            if mt is None:  # the stage's own cap is kept free for the answer: minimal prompts at 4,096
                assert {c["meta"]["prompt_style"] for c in calls} <= {"compact", "minimal"}
    finally:
        srv.stop()
