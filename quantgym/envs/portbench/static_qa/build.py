"""Write the full QA set to JSONL files, print counts, examples and timings (spec §9.1).

The QA set is not shipped as package data: it is generated from the bundled real data on first use
(≈ 0.3 s for the 350 test pairs of the published tables, ≈ 1.5 s for all 7 000 pairs) and cached per
process. This script materialises it for inspection or for use outside quantgym::

    python -m quantgym.envs.portbench.static_qa.build --out qa_set/            # train/val/test JSONL + counts.json
    python -m quantgym.envs.portbench.static_qa.build --examples               # one clean test prompt per template
    python -m quantgym.envs.portbench.static_qa.build --out qa_set/ --fidelity paper --data /path/to/data

The files are byte-identical for the same data, config and fidelity (no salted hash, no global RNG).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from quantgym.envs.portbench.static_qa.config import TEMPLATES, QAConfig
from quantgym.envs.portbench.static_qa.context import SPLIT_NAMES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="output folder for qa_<split>.jsonl and counts.json")
    ap.add_argument("--fidelity", default="clean", choices=("clean", "paper"))
    ap.add_argument("--data", default=None, help="user data directory (default: bundled data)")
    ap.add_argument("--examples", action="store_true", help="print the first test prompt of every template")
    args = ap.parse_args(argv)

    from quantgym.envs.portbench.data import load_portbench_data
    from quantgym.envs.portbench.static_qa.generator import QAGenerator, QAItem, dumps_jsonl
    from quantgym.envs.portbench.static_qa.prompt import render_prompt

    t0 = time.perf_counter()
    data = load_portbench_data(args.data)
    t1 = time.perf_counter()
    gen = QAGenerator(data, QAConfig(), args.fidelity)
    test = [p for t in TEMPLATES for p in gen.pairs(t, "test", QAConfig().n_test)]
    t2 = time.perf_counter()
    counts = gen.counts()
    t3 = time.perf_counter()
    print(f"data load {t1 - t0:.2f}s | first {QAConfig().n_test} test pairs x 7 templates ({len(test)}) {t2 - t1:.2f}s "
          f"| full set {t3 - t1:.2f}s")
    total = 0
    for t in TEMPLATES:
        c = counts[t]
        total += c["total"]
        print(f"{t}: " + ", ".join(f"{s} {c[s]}" for s in SPLIT_NAMES) + f", total {c['total']}")
    print(f"all templates: {total}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for s in SPLIT_NAMES:
            (args.out / f"qa_{s}.jsonl").write_bytes(dumps_jsonl(p for t in TEMPLATES for p in gen.pairs(t, s)))
        (args.out / "counts.json").write_text(json.dumps({"fidelity": args.fidelity, "config": QAConfig().to_dict(),
                                                          "counts": counts, "total": total}, indent=1))
        print(f"wrote {args.out}")
    if args.examples:
        for t in TEMPLATES:
            p = gen.pairs(t, "test", 1)[0]
            print(f"\n===== {p.id} (regime {p.market_regime}) =====\n{render_prompt(QAItem(p), args.fidelity)}")
            print(f"----- answer: {p.answer}")
            print(f"----- paper-mode context_summary: {p.context_summary}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
