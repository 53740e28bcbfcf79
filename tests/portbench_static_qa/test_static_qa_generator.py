"""QA set construction on the bundled real data (spec §9.1, §9.3): splits, order, size, determinism,
point in time and the answer leak (clean vs paper)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
import random
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from quantgym.envs.portbench.data import load_portbench_data
from quantgym.envs.portbench.static_qa.config import TEMPLATES, QAConfig
from quantgym.envs.portbench.static_qa.context import candidate_order, compute_splits
from quantgym.envs.portbench.static_qa.generator import QAGenerator, dumps_jsonl, get_generator
from quantgym.envs.portbench.static_qa.prompt import render_prompt


@pytest.fixture(scope="module")
def data():
    return load_portbench_data()


@pytest.fixture(scope="module")
def gen(data):
    return get_generator(data)


@pytest.fixture(scope="module")
def paper_gen(data):
    return get_generator(data, fidelity="paper")


def test_splits_on_bundle(data):
    assert compute_splits(data, QAConfig()) == (
        ("train", dt.date(2015, 1, 1), dt.date(2022, 12, 31)),
        ("val", dt.date(2023, 1, 1), dt.date(2024, 12, 31)),
        ("test", dt.date(2025, 1, 1), dt.date(2025, 12, 31)),
    )


def test_candidate_order_rule(data):
    order = candidate_order(data, QAConfig())
    assert [s for _, s in order[:6]] == ["train", "val", "test", "train", "val", "test"]
    for k, (name, a, b) in enumerate(compute_splits(data, QAConfig())):
        days = [t.date() for t in pd.bdate_range(a, b)]
        random.Random(42 + k).shuffle(days)
        assert [d for d, s in order if s == name] == days  # seed 42 / 43 / 44, one bucket (no text)
    assert len(order) == 2087 + 522 + 261  # weekdays 2015–2022, 2023–2024, 2025


def test_full_set_counts(gen):
    counts = gen.counts()
    # every template reaches the 1 000 cap on the bundle -> 7 000 pairs (paper: 6 269, see docs/qa.md)
    assert all(counts[t]["total"] == 1000 for t in TEMPLATES)
    assert all(counts[t]["test"] >= 50 for t in TEMPLATES)
    ids = [p.id for t in TEMPLATES for p in gen.pairs(t)]
    assert len(set(ids)) == 7000
    assert re.fullmatch(r"T\d_all_\d{8}_\d{4}", ids[0])


def test_test_split_first_50_in_file_order(gen):
    for t in TEMPLATES:
        ps = gen.pairs(t, "test", 50)
        assert len(ps) == 50 and all(p.split == "test" for p in ps)
        assert [p.seq for p in ps] == sorted(p.seq for p in ps)
        assert ps == [p for p in gen.pairs(t) if p.split == "test"][:50]
        assert all(dt.date(2025, 1, 1) <= dt.date.fromisoformat(p.decision_date) <= dt.date(2025, 12, 31) for p in ps)


def test_regeneration_is_byte_identical(data, gen):
    fresh = QAGenerator(data, QAConfig(), "clean")
    a = dumps_jsonl(p for t in TEMPLATES for p in fresh.pairs(t, "test", 50))
    b = dumps_jsonl(p for t in TEMPLATES for p in gen.pairs(t, "test", 50))
    assert a == b


def test_same_bytes_in_other_processes_with_other_hash_seeds(gen):
    code = ("import hashlib,sys;from quantgym.envs.portbench.static_qa.generator import get_generator,dumps_jsonl;"
            "g=get_generator();sys.stdout.write(hashlib.sha256(dumps_jsonl(p for t in "
            "('T1','T2','T3','T4','T5','T6','T7') for p in g.pairs(t,n=40))).hexdigest())")
    want = hashlib.sha256(dumps_jsonl(p for t in TEMPLATES for p in gen.pairs(t, n=40))).hexdigest()
    for seed in ("1", "987"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == want


def test_asset_selection_follows_the_class_rules(gen, data):
    cls = dict(zip(data.tickers, data.asset_class))
    for p in gen.pairs("T5", "test", 50) + gen.pairs("T6", "test", 50):
        c = [cls[a] for a in p.assets]
        assert c[0] == "equities" and c[1] == "cryptocurrency" and len(set(c[2:])) == 2
        assert set(c[2:]) <= {"bonds", "commodities", "real_estate", "cash"}
    for p in gen.pairs("T4", "test", 50):
        assert cls[p.assets[0]] in ("equities", "cryptocurrency") and cls[p.assets[1]] != cls[p.assets[0]]
    assert all(p.assets == ("SPY",) for p in gen.pairs("T7", "test", 50))
    t6 = gen.pairs("T6", "test", 50)
    assert 10 < sum(p.answer == "no" for p in t6) < 40  # ≈ 50/50 by construction


def test_point_in_time_future_rows_do_not_change_prompts(data):
    cut = pd.Timestamp("2025-07-01")
    t = int(data.dates.searchsorted(cut))
    px = np.array(data.prices)
    px[t:] *= 1.5
    rt = np.array(data.returns)
    rt[t:] = rt[t:] * 3.0 + 0.01
    mutated = dataclasses.replace(data, prices=px, returns=rt)
    a, b = QAGenerator(data), QAGenerator(mutated)
    for tmpl in TEMPLATES:
        for p, q in zip(a.pairs(tmpl, "test", 50), b.pairs(tmpl, "test", 50)):
            assert p.id == q.id
            if dt.date.fromisoformat(p.decision_date) <= cut.date():
                # everything shown was fixed before the cut; only T1's truth reads rows >= d
                assert p.question == q.question and p.context_summary == q.context_summary
                assert p.market_regime == q.market_regime
                if tmpl != "T1":
                    assert p.answer == q.answer


def _has_number(text: str, value: float, fmt: str) -> bool:
    s = format(value, fmt)
    return re.search(rf"(?<![\d.]){re.escape(s)}(?!\d)", text) is not None


def _key_numbers(p) -> list[tuple[float, str]]:
    md = p.metadata
    if p.template == "T1":
        return [(md["future_return"], ".4f")]
    if p.template == "T2":
        return [(p.answer_numeric, ".4f")]
    if p.template == "T3":
        return [(md["var99"], ".4f")] + ([(p.answer_numeric, ".4f")] if p.answer_numeric < 1 else [])
    if p.template in ("T4", "T5"):
        return [(w, ".4f") for w in md["weights"].values() if 0.01 < w < 0.99] + (  # skip tiny weights (0.0001 = a std)
            [(p.answer_numeric, ".3f")] if p.template == "T5" else [])
    if p.template == "T6":
        return [(md["max_deviation"], ".4f")]
    return []


def test_clean_prompt_does_not_leak_the_answer(gen):
    items = gen.items("test", n_per_template=50, restricted="both")
    assert len(items) == 450
    for it in items:
        p = it.pair
        prompt = render_prompt(it, "clean")
        if p.template != "T1" and p.answer != "no":  # one-word answers are among the listed options
            assert p.answer not in prompt, p.id
        assert "Context:" not in prompt and p.context_summary not in prompt
        for v, fmt in _key_numbers(p):
            assert not _has_number(prompt, v, fmt), (p.id, v)
        if p.template == "T7":
            assert f"Regime: {p.market_regime}" not in prompt
            assert p.answer.split("Allocations: ")[1] not in prompt
            assert "Market regime" not in prompt


def test_paper_prompt_reproduces_the_leak(paper_gen):
    for it in paper_gen.items("test", n_per_template=20, restricted="both"):
        p = it.pair
        prompt = render_prompt(it, "paper")
        assert f"Context: {p.context_summary}" in prompt
        if p.template == "T3":
            assert _has_number(prompt, p.answer_numeric, ".4f")
        elif p.template == "T4":
            assert all(_has_number(prompt, w, ".3f") for w in p.metadata["weights"].values())
        elif p.template == "T5":
            assert p.answer in prompt
        elif p.template == "T6":
            assert f"Decision: {p.metadata['decision']}" in prompt
        elif p.template == "T7":
            assert p.answer.split("Allocations: ")[1] in prompt and f"Regime: {p.market_regime}" in prompt
