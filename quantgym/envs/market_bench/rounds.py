"""Deterministic rounds of Market-Bench (spec §5, §9.3, §9.13, §9.14).

A round = input files (``book.csv`` + ``schedule.csv`` | ``option_delta.csv``), the round's
parameters, metadata, and the reference outputs. :func:`build_round` produces a round from the
raw sources and the seeds of (task version, strategy, round); the rounds are built once by
``python -m quantgym.envs.market_bench.build_data`` and shipped as package data
(``quantgym/data/bundled/market_bench/<version>/<strategy>/round_<r>/``: ``*.csv.gz``,
``params.json``, ``meta.json``, ``reference.json.gz``) with a sha256 manifest.
:func:`load_round` reads the shipped round; :func:`write_inputs` writes plain ``.csv`` copies
into an attempt's input folder.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from quantgym.envs.market_bench.config import (
    DATASETS, LEVELS, METRIC_KEYS, STRATEGIES, STRATEGY_NUMBER, TASK_VERSION, DeltaHedgeRound, PairsRound,
    ScheduledRound, round_config, stream_seed,
)

BUNDLED_ROOT = Path(__file__).resolve().parents[2] / "data" / "bundled" / "market_bench"

#: input file names per strategy (spec §9.1)
INPUT_FILES: dict[str, tuple[str, ...]] = {
    "scheduled": ("book.csv", "schedule.csv"),
    "pairs": ("book.csv",),
    "delta_hedge": ("book.csv", "option_delta.csv"),
}


@dataclass
class Round:
    """One (strategy, round): input tables, parameters (what the prompt states), metadata, reference."""

    strategy: str
    round: int
    inputs: dict[str, pd.DataFrame]
    params: dict[str, Any]
    meta: dict[str, Any]
    reference: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, float]:
        """Reference metrics (the §9.11 keys only)."""
        return {k: float(self.reference[k]) for k in METRIC_KEYS[self.strategy]}


def csv_text(df: pd.DataFrame) -> str:
    """The exact text of an input file: header row, prices with exactly 2 decimals (§9.1.3)."""
    buf = io.StringIO()
    df.to_csv(buf, index=False, float_format="%.2f", lineterminator="\n")
    return buf.getvalue()


def _offset_ns(unit: str) -> int:
    return {"ms": 1_000_000, "s": 1_000_000_000, "ns": 1}[unit]


def build_round(strategy: str, round_: int, shared: str | Path | None = None) -> Round:
    """Build (strategy, round) of the current task version from the sources (spec §9.13).

    Parameters
    ----------
    shared : path, optional
        Root of the raw shared data (default: ``QUANTGYM_SHARED_DATA`` or ``/work/shared/data``;
        the SSE day comes from the bundled parquet tables when ``None``).
    """
    from quantgym.envs.market_bench.data import generate_option_delta, generate_pairs_book, randomise_sizes, real_book

    cfg = round_config(strategy, round_)
    r = int(round_)
    meta: dict[str, Any] = {"task_version": TASK_VERSION, "strategy": strategy, "strategy_number": STRATEGY_NUMBER[strategy],
                            "round": r, "levels": LEVELS}
    if isinstance(cfg, ScheduledRound):
        seed = stream_seed(strategy, r, "sizes")
        book = randomise_sizes(real_book(cfg.data, LEVELS, shared), np.random.default_rng(seed))
        t0 = int(book["ts_event"].iloc[0])
        unit = _offset_ns(cfg.offset_unit)
        sched = pd.DataFrame({"ts_event": [t0 + off * unit for off, _, _ in cfg.schedule],
                              "side": [s for _, s, _ in cfg.schedule], "qty": [q for _, _, q in cfg.schedule]})
        inputs = {"book.csv": book, "schedule.csv": sched}
        params = {"c0": cfg.c0}
        meta.update(dataset=cfg.data, seeds={"sizes": seed}, synthetic=False, **_ds_meta(cfg.data),
                    schedule_offsets=[[o, s, q] for o, s, q in cfg.schedule], offset_unit=cfg.offset_unit)
    elif isinstance(cfg, PairsRound):
        seed = stream_seed(strategy, r, "book")
        book = generate_pairs_book(cfg.book, np.random.default_rng(seed))
        inputs = {"book.csv": book}
        params = {"symbol_a": cfg.book.symbol_a, "symbol_b": cfg.book.symbol_b, "beta": cfg.beta, "window": cfg.window,
                  "z_in": cfg.z_in, "z_out": cfg.z_out, "cooldown_ns": cfg.cooldown_ns, "k": cfg.k,
                  "delay_ns": cfg.delay_ns, "alloc": cfg.alloc, "c0": cfg.c0}
        meta.update(dataset="synthetic_pairs", seeds={"book": seed}, synthetic=True, currency="USD",
                    instrument="KO / PEP labels on a SYNTHETIC seeded book (no real KO/PEP book data exists here)",
                    source="generator of spec §9.12.1", generator=asdict(cfg.book))
    elif isinstance(cfg, DeltaHedgeRound):
        s_sizes, s_delta = stream_seed(strategy, r, "sizes"), stream_seed(strategy, r, "delta")
        book = randomise_sizes(real_book(cfg.data, LEVELS, shared), np.random.default_rng(s_sizes))
        ts = book["ts_event"].to_numpy()
        delta = generate_option_delta(cfg.delta, int(ts[0]), int(ts[-1]), np.random.default_rng(s_delta))
        inputs = {"book.csv": book, "option_delta.csv": delta}
        params = {"c0": cfg.c0, "interval_ns": cfg.interval_ns, "delay_ns": cfg.delay_ns, "fraction": cfg.fraction,
                  "lot": cfg.lot, "min_gap_ns": cfg.min_gap_ns, "k": cfg.k}
        meta.update(dataset=cfg.data, seeds={"sizes": s_sizes, "delta": s_delta}, synthetic=False,
                    synthetic_parts=["option_delta.csv (seeded random walk, spec §9.12.2)", "level sizes (randomised)"],
                    delta_series=asdict(cfg.delta), **_ds_meta(cfg.data))
    else:  # pragma: no cover
        raise TypeError(cfg)
    book = inputs["book.csv"]
    meta.update(n_rows=len(book), first_ts_event=int(book["ts_event"].iloc[0]),
                last_ts_event=int(book["ts_event"].iloc[-1]), symbols=sorted(set(book["symbol"].astype(str))))
    # round-trip through the exact file text so the reference sees what the agent sees
    inputs = {name: pd.read_csv(io.StringIO(csv_text(df))) for name, df in inputs.items()}
    rnd = Round(strategy, r, inputs, params, meta)
    rnd.reference = run_reference(rnd)
    return rnd


def _ds_meta(dataset: str) -> dict[str, Any]:
    d = DATASETS[dataset]
    return {"currency": d["currency"], "instrument": d["instrument"], "source": d["source"],
            **({"window_local": list(d["window"])} if "window" in d else {})}


def run_reference(rnd: Round) -> dict[str, Any]:
    """Run the reference backtester of the round's strategy on its inputs (metrics + equity curve)."""
    from quantgym.envs.market_bench.references import BACKTESTERS

    fn = BACKTESTERS[rnd.strategy]
    if rnd.strategy == "scheduled":
        return fn(rnd.inputs["book.csv"], rnd.inputs["schedule.csv"], **rnd.params)
    if rnd.strategy == "pairs":
        return fn(rnd.inputs["book.csv"], **rnd.params)
    return fn(rnd.inputs["book.csv"], rnd.inputs["option_delta.csv"], **rnd.params)


# ------------------------------------------------------------------ shipping
def round_dir(strategy: str, round_: int, root: Path = BUNDLED_ROOT, version: str = TASK_VERSION) -> Path:
    return Path(root) / version / strategy / f"round_{int(round_)}"


def _gz(text: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as fh:
        fh.write(text.encode())
    return buf.getvalue()


def input_hashes(rnd: Round) -> dict[str, str]:
    """sha256 of each input file's exact text (what the manifest pins, spec §9.3.3)."""
    return {name: hashlib.sha256(csv_text(df).encode()).hexdigest() for name, df in rnd.inputs.items()}


def reference_text(rnd: Round) -> str:
    """The exact JSON text of the shipped reference outputs (metrics + equity curve)."""
    return json.dumps({k: v for k, v in rnd.reference.items()}, separators=(",", ":"))


def round_hashes(rnd: Round) -> dict[str, str]:
    """sha256 of every shipped text of a round: the input files and ``reference.json``."""
    h = input_hashes(rnd)
    h["reference.json"] = hashlib.sha256(reference_text(rnd).encode()).hexdigest()
    return h


def write_round(rnd: Round, root: Path = BUNDLED_ROOT) -> dict[str, str]:
    """Write a built round as package data; returns the sha256 of its files' texts."""
    d = round_dir(rnd.strategy, rnd.round, root)
    d.mkdir(parents=True, exist_ok=True)
    for name, df in rnd.inputs.items():
        (d / f"{name}.gz").write_bytes(_gz(csv_text(df)))
    (d / "params.json").write_text(json.dumps(rnd.params, indent=1) + "\n")
    (d / "meta.json").write_text(json.dumps(rnd.meta, indent=1) + "\n")
    (d / "reference.json.gz").write_bytes(_gz(reference_text(rnd)))
    return round_hashes(rnd)


def load_round(strategy: str, round_: int, root: Path = BUNDLED_ROOT) -> Round:
    """Load a shipped round (inputs, params, meta, reference). Raises FileNotFoundError if absent."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")
    round_config(strategy, round_)  # validates the round number
    d = round_dir(strategy, round_, root)
    if not d.exists():
        raise FileNotFoundError(f"round data missing: {d} (rebuild with python -m quantgym.envs.market_bench.build_data)")
    inputs = {name: pd.read_csv(d / f"{name}.gz") for name in INPUT_FILES[strategy]}
    params = json.loads((d / "params.json").read_text())
    meta = json.loads((d / "meta.json").read_text())
    with gzip.open(d / "reference.json.gz", "rt") as fh:
        ref = json.load(fh)
    return Round(strategy, int(round_), inputs, params, meta, ref)


def manifest_path(root: Path = BUNDLED_ROOT, version: str = TASK_VERSION) -> Path:
    return Path(root) / version / "manifest.json"


def write_inputs(rnd: Round, folder: str | Path) -> dict[str, str]:
    """Write the round's plain ``.csv`` input files into ``folder``; returns name -> absolute path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, df in rnd.inputs.items():
        p = folder / name
        p.write_text(csv_text(df))
        out[name] = str(p.resolve())
    return out


__all__ = ["Round", "build_round", "run_reference", "load_round", "write_round", "write_inputs", "csv_text",
           "input_hashes", "round_hashes", "reference_text", "round_dir", "manifest_path", "INPUT_FILES", "BUNDLED_ROOT"]
