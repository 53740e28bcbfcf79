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
    DATASETS, LEVELS, METRIC_KEYS, SHIPS_INPUTS, STRATEGIES, STRATEGY_NUMBER, TASK_VERSION, DeltaHedgeRound,
    PairsRound, RealPairsBook, ScheduledRound, check_task_set, round_config, stream_seed,
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


def build_inputs(strategy: str, round_: int, shared: str | Path | None = None, task_set: str | None = None,
                 data_dir: str | Path | None = None) -> Round:
    """The inputs, parameters and metadata of (strategy, round) of a task set, without the reference.

    Parameters
    ----------
    shared : path, optional
        v1 only: root of the raw shared data (``None``: the shipped copies).
    task_set : {"v1", "v2"}, optional
        Default ``v1`` (:data:`~quantgym.envs.market_bench.config.DEFAULT_TASK_SET`).
    data_dir : path, optional
        v2 pairs only: the A-share Level-2 folder (:func:`quantgym.data.a_share_l2.data_dir`).
    """
    from quantgym.envs.market_bench.data import (generate_option_delta, generate_pairs_book, randomise_sizes,
                                                 real_book, real_pairs_book)

    ts_name = check_task_set(task_set)
    config = round_config(strategy, round_, ts_name)
    r = int(round_)

    def seed(stream: str) -> int:
        return stream_seed(strategy, r, stream, version=ts_name)

    meta: dict[str, Any] = {"task_version": ts_name, "strategy": strategy, "strategy_number": STRATEGY_NUMBER[strategy],
                            "round": r, "levels": LEVELS}
    if isinstance(config, ScheduledRound):
        book = randomise_sizes(real_book(config.data, LEVELS, shared), np.random.default_rng(seed("sizes")))
        t0 = int(book["ts_event"].iloc[0])
        unit = _offset_ns(config.offset_unit)
        sched = pd.DataFrame({"ts_event": [t0 + off * unit for off, _, _ in config.schedule],
                              "side": [s for _, s, _ in config.schedule], "qty": [q for _, _, q in config.schedule]})
        inputs = {"book.csv": book, "schedule.csv": sched}
        params = {"c0": config.c0}
        meta.update(dataset=config.data, seeds={"sizes": seed("sizes")}, synthetic=False, **_ds_meta(config.data),
                    schedule_offsets=[[o, s, q] for o, s, q in config.schedule], offset_unit=config.offset_unit)
    elif isinstance(config, PairsRound) and isinstance(config.book, RealPairsBook):
        raw = real_pairs_book(config.book, data_dir)
        book = randomise_sizes(raw, np.random.default_rng(seed("sizes")))
        inputs = {"book.csv": book}
        params = {"symbol_a": config.book.symbol_a, "symbol_b": config.book.symbol_b, "beta": config.beta,
                  "window": config.window, "z_in": config.z_in, "z_out": config.z_out, "cooldown_ns": config.cooldown_ns, "k": config.k,
                  "delay_ns": config.delay_ns, "alloc": config.alloc, "c0": config.c0}
        from quantgym.data.a_share_l2 import SNAPSHOT_FILES

        day, desc = SNAPSHOT_FILES[config.book.file]["date"], SNAPSHOT_FILES[config.book.file]["desc"]
        ties = int((np.diff(book["ts_event"].to_numpy()) == 0).sum())
        meta.update(dataset=f"a_share_l2/{config.book.file}", seeds={"sizes": seed("sizes")}, synthetic=False,
                    currency="CNY", source=f"a_share_l2 {SNAPSHOT_FILES[config.book.file]['zip']}",
                    instrument=(f"{config.book.symbol_a} (leg A) and {config.book.symbol_b} (leg B), {desc}, {day}, "
                                f"{config.book.window[0]}-{config.book.window[1]} Asia/Shanghai "
                                "(continuous trading; no lunch-break rows), real prices (dolphindb/Tutorials_CN "
                                "sample, original vendor not stated)"),
                    window_local=list(config.book.window), equal_ts_rows=ties, real_book=asdict(config.book))
    elif isinstance(config, PairsRound):
        book = generate_pairs_book(config.book, np.random.default_rng(seed("book")))
        inputs = {"book.csv": book}
        params = {"symbol_a": config.book.symbol_a, "symbol_b": config.book.symbol_b, "beta": config.beta,
                  "window": config.window, "z_in": config.z_in, "z_out": config.z_out, "cooldown_ns": config.cooldown_ns, "k": config.k,
                  "delay_ns": config.delay_ns, "alloc": config.alloc, "c0": config.c0}
        meta.update(dataset="synthetic_pairs", seeds={"book": seed("book")}, synthetic=True, currency="USD",
                    instrument="KO / PEP labels on a SYNTHETIC seeded book (no real KO/PEP book data exists here)",
                    source="generator of spec §9.12.1", generator=asdict(config.book))
    elif isinstance(config, DeltaHedgeRound):
        book = randomise_sizes(real_book(config.data, LEVELS, shared), np.random.default_rng(seed("sizes")))
        ts = book["ts_event"].to_numpy()
        delta = generate_option_delta(config.delta, int(ts[0]), int(ts[-1]), np.random.default_rng(seed("delta")))
        inputs = {"book.csv": book, "option_delta.csv": delta}
        params = {"c0": config.c0, "interval_ns": config.interval_ns, "delay_ns": config.delay_ns,
                  "fraction": config.fraction, "lot": config.lot, "min_gap_ns": config.min_gap_ns, "k": config.k}
        meta.update(dataset=config.data, seeds={"sizes": seed("sizes"), "delta": seed("delta")}, synthetic=False,
                    synthetic_parts=["option_delta.csv (seeded random walk, spec §9.12.2)", "level sizes (randomised)"],
                    delta_series=asdict(config.delta), **_ds_meta(config.data))
    else:  # pragma: no cover
        raise TypeError(config)
    book = inputs["book.csv"]
    meta.update(n_rows=len(book), first_ts_event=int(book["ts_event"].iloc[0]),
                last_ts_event=int(book["ts_event"].iloc[-1]), symbols=sorted(set(book["symbol"].astype(str))))
    if ts_name != "v1":
        meta["data_note"] = data_note(strategy, meta)
    # round-trip through the exact file text so the reference sees what the agent sees
    inputs = {name: pd.read_csv(io.StringIO(csv_text(df))) for name, df in inputs.items()}
    return Round(strategy, r, inputs, params, meta)


def build_round(strategy: str, round_: int, shared: str | Path | None = None, task_set: str | None = None,
                data_dir: str | Path | None = None) -> Round:
    """Build (strategy, round) of a task set from the sources (spec §9.13; v2: docs/market_bench.md) and run
    the reference backtester on it. Arguments as :func:`build_inputs`."""
    rnd = build_inputs(strategy, round_, shared, task_set, data_dir)
    rnd.reference = run_reference(rnd)
    return rnd


def data_note(strategy: str, meta: dict[str, Any]) -> str:
    """What a v2 round's data is (real symbol, venue, date, window, source) and what was randomised (prompt)."""
    seeds = ", ".join(f"{k} {v}" for k, v in meta["seeds"].items())
    note = (f"REAL DATA: {meta['instrument']}; {meta['n_rows']:,} book rows. Real: every price (so raw mids and "
            f"spreads). Randomised: every level size, replaced by 100..2,000 shares (the paper's preprocessing; "
            f"seed {seeds}); only the top {meta['levels']} levels are kept.")
    if strategy == "delta_hedge":
        note += " Synthetic: option_delta.csv, a seeded random walk."
    if meta.get("equal_ts_rows"):
        note += (f" {meta['equal_ts_rows']:,} rows share their ts_event with the previous row (the two stocks' "
                 "snapshots of the same second; leg A's row comes first): process rows in FILE order, and "
                 "as_of(X, t) at a row means X's last row at or before THIS row in the file (a later row with an "
                 "equal ts_event is not yet seen).")
    return note


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
    """Write a built round as package data; returns the sha256 of its files' texts.

    The input files are written only for a task set that ships them
    (:data:`~quantgym.envs.market_bench.config.SHIPS_INPUTS`); the manifest pins their hashes either way.
    """
    version = rnd.meta["task_version"]
    d = round_dir(rnd.strategy, rnd.round, root, version)
    d.mkdir(parents=True, exist_ok=True)
    if SHIPS_INPUTS[version]:
        for name, df in rnd.inputs.items():
            (d / f"{name}.gz").write_bytes(_gz(csv_text(df)))
    (d / "params.json").write_text(json.dumps(rnd.params, indent=1) + "\n")
    (d / "meta.json").write_text(json.dumps(rnd.meta, indent=1) + "\n")
    (d / "reference.json.gz").write_bytes(_gz(reference_text(rnd)))
    return round_hashes(rnd)


def load_round(strategy: str, round_: int, root: Path = BUNDLED_ROOT, task_set: str | None = None,
               data_dir: str | Path | None = None) -> Round:
    """Load a shipped round (inputs, params, meta, reference) of a task set (default ``v1``).

    A task set that does not ship its inputs (v2) rebuilds them with :func:`build_inputs` (``data_dir``: the
    A-share Level-2 folder of the v2 pairs rounds) and checks each file's sha256 against the shipped manifest.

    Raises
    ------
    FileNotFoundError
        The round's shipped files, or (v2 pairs) the A-share Level-2 folder, are missing.
    RuntimeError
        Rebuilt v2 inputs differ from the manifest (the sources changed).
    """
    version = check_task_set(task_set)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {STRATEGIES}")
    round_config(strategy, round_, version)  # validates the round number
    d = round_dir(strategy, round_, root, version)
    if not d.exists():
        raise FileNotFoundError(f"round data missing: {d} (rebuild with python -m quantgym.envs.market_bench.build_data)")
    params = json.loads((d / "params.json").read_text())
    meta = json.loads((d / "meta.json").read_text())
    with gzip.open(d / "reference.json.gz", "rt") as fh:
        ref = json.load(fh)
    if SHIPS_INPUTS[version]:
        inputs = {name: pd.read_csv(d / f"{name}.gz") for name in INPUT_FILES[strategy]}
    else:
        key = (strategy, int(round_), version, str(Path(root).resolve()), str(data_dir))
        if key not in _VERIFIED_INPUTS:
            built = build_inputs(strategy, round_, task_set=version, data_dir=data_dir).inputs
            shipped = json.loads(manifest_path(root, version).read_text())["rounds"][f"{strategy}/round_{int(round_)}"]
            bad = [n for n, h in input_hashes(Round(strategy, int(round_), built, params, meta)).items()
                   if shipped["files"].get(n) != h]
            if bad:
                raise RuntimeError(f"Market-Bench {version} {strategy} round {round_}: rebuilt {bad} differ from the "
                                   "shipped manifest (the sources changed)")
            _VERIFIED_INPUTS[key] = built
        inputs = {n: df.copy() for n, df in _VERIFIED_INPUTS[key].items()}
    return Round(strategy, int(round_), inputs, params, meta, ref)


#: rebuilt and verified inputs of the rounds that are not shipped (v2), per process: building one takes
#: 0.3-3 s (the MSFT hour's rebuild is itself cached by :func:`~quantgym.envs.market_bench.data.msft_hour_book`)
_VERIFIED_INPUTS: dict[tuple, dict[str, pd.DataFrame]] = {}


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


__all__ = ["Round", "build_inputs", "build_round", "data_note", "run_reference", "load_round", "write_round", "write_inputs", "csv_text",
           "input_hashes", "round_hashes", "reference_text", "round_dir", "manifest_path", "INPUT_FILES", "BUNDLED_ROOT"]
