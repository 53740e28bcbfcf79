"""Every number users get, pinned: the main job, the paper reproduction and the Market-Bench rounds.

    python benchmarks/outputs_check.py            # run, compare with tests/golden/outputs.json.gz; exit 1 on a difference
    python benchmarks/outputs_check.py --write    # run and (re)write the golden file
    python benchmarks/outputs_check.py --from BENCH_DIR REPRO_DIR --write   # golden from existing output folders

What is compared (issue #14: "nothing changes in what users get"):

- ``quantgym bench --no-plots`` (every task on the bundled real data: the six PortBench baselines on
  three profiles and four periods, the four Quant-Arena examples on the sealed year, the Market-Bench
  reference agents): ``summary.csv`` as text and ``results.json``'s ``tasks`` with every number;
- ``quantgym reproduce portbench`` (paper and clean mode, ablation): ``portbench_reproduction.json``;
- the Market-Bench manifest: every shipped round's sha256 (inputs and reference outputs) as recorded.

Wall times, timestamps, host names and file paths are dropped before comparing (they are not results).
A test (``tests/test_outputs_unchanged.py``) runs the check.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "outputs.json.gz"
#: keys whose values are not results (times, places, run environment)
VOLATILE = {"elapsed_s", "wall_s", "latency_s", "timings", "timing", "created", "host", "pid", "environment",
            "plots", "record_path", "records_dir", "path", "paths", "out_dir", "command", "generated", "seconds"}


def _clean(x: Any, tmp: str) -> Any:
    if isinstance(x, dict):
        return {k: _clean(v, tmp) for k, v in x.items()
                if k not in VOLATILE and not k.endswith(("_s", "_seconds", "_rss", "_rss_mb", "_mib"))}
    if isinstance(x, list):
        return [_clean(v, tmp) for v in x]
    if isinstance(x, str) and tmp and tmp in x:
        return x.replace(tmp, "<out>")
    return x


def capture(bench: Path, repro: Path) -> dict[str, Any]:
    """The comparable content of a bench folder and a reproduce folder, plus the Market-Bench manifest."""
    from quantgym.envs.market_bench.rounds import manifest_path

    res = json.loads((bench / "results.json").read_text())
    rep = json.loads((repro / "portbench_reproduction.json").read_text())
    return {"bench_summary_csv": (bench / "summary.csv").read_text(),
            "bench_tasks": _clean(res["tasks"], str(bench)),
            "reproduce": _clean(rep, str(repro)),
            "market_bench_manifest": json.loads(manifest_path().read_text())}


def run(work: Path) -> tuple[Path, Path]:
    bench, repro = work / "bench", work / "repro"
    cli = [sys.executable, "-c", "from quantgym.cli import app; app()"]
    # relative --out in a scratch cwd: the folder names written into the results are the same every time
    subprocess.run([*cli, "bench", "--out", "bench", "--no-plots", "-q"], check=True, cwd=work,
                   stdout=subprocess.DEVNULL)
    subprocess.run([*cli, "reproduce", "portbench", "--out", "repro"], check=True, cwd=work,
                   stdout=subprocess.DEVNULL)
    return bench, repro


def diff(a: Any, b: Any, where: str = "", limit: int = 20, added_ok: bool = False) -> list[str]:
    """Paths where ``a`` and ``b`` differ (at most ``limit``); ``added_ok``: keys only in ``b`` are fine."""
    out: list[str] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if added_ok and k not in a:
                continue
            if k not in a or k not in b:
                out.append(f"{where}/{k}: only in {'golden' if k in a else 'new'}")
            else:
                out += diff(a[k], b[k], f"{where}/{k}", limit, added_ok)
            if len(out) >= limit:
                break
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{where}[{i}]", limit, added_ok)
            if len(out) >= limit:
                break
    elif a != b:
        out.append(f"{where}: golden {str(a)[:80]!r} != new {str(b)[:80]!r}")
    return out[:limit]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the golden file instead of comparing")
    ap.add_argument("--added-ok", action="store_true", help="compare only what the golden file has (new keys "
                    "pass): the check to run before rewriting the golden file after an additive change")
    ap.add_argument("--keep", default=None, help="run in this folder and keep the outputs (default: a temporary one)")
    ap.add_argument("--from", dest="src", nargs=2, metavar=("BENCH_DIR", "REPRO_DIR"), default=None,
                    help="use existing output folders instead of running the commands")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="qg-outputs-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        bench, repro = (Path(args.src[0]), Path(args.src[1])) if args.src else run(work)
        new = json.loads(json.dumps(capture(bench, repro)))
    if args.write:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        with gzip.GzipFile(GOLDEN, "wb", mtime=0) as fh:
            fh.write(json.dumps(new, sort_keys=True, indent=0).encode())
        print(f"wrote {GOLDEN.relative_to(ROOT)}")
        return
    golden = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    d = diff(golden, new, limit=20, added_ok=args.added_ok)
    if d:
        print("outputs differ from tests/golden/outputs.json.gz:\n  " + "\n  ".join(d))
        sys.exit(1)
    print("every number identical to tests/golden/outputs.json.gz")


if __name__ == "__main__":
    main()
