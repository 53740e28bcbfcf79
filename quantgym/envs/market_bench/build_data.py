"""Build the packaged Market-Bench data from the maintainers' raw sources (not shipped).

Writes
- ``quantgym/data/bundled/sse_600519_20230207/{snapshots,trades,orders}.parquet``: the SSE
  Level-2 day of 600519 converted to CNY and shares (:mod:`quantgym.data.sse_l2`);
- ``quantgym/data/bundled/market_bench/sources/``: gzip copies of the small real LOB sources
  (LOBSTER MSFT excerpt: message file + derived top-10 book; LOBSTER TSLA sample; the two
  Databento MBP-10 DBN fixtures), with their PROVENANCE.md (shipped beside them);
- ``quantgym/data/bundled/market_bench/<version>/<strategy>/round_<r>/``: every round's
  inputs (csv.gz), params, meta and reference outputs, plus ``manifest.json`` (sha256 of each
  file's exact text), after the builder checks of spec §9.14.

- ``.../market_bench/v2/...``: task set v2 (``--task-set v2``): params, meta, reference outputs and the
  manifest; its input files are not shipped but rebuilt at load time and checked against the manifest.

Usage::

    python -m quantgym.envs.market_bench.build_data [--shared RAW] [--check] [--task-set v2]

``RAW`` is the raw-data folder (default ``$QUANTGYM_SHARED_DATA``).
``--check`` rebuilds in memory and compares with the shipped manifest without writing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from quantgym._util import shared_data_dir


def build(shared: Path, check_only: bool = False, task_set: str = "v1", data_dir: Path | None = None) -> dict:
    """Build (or ``check_only``: rebuild in memory and compare) every round of ``task_set``.

    v1 also re-copies its raw sources from ``shared``; v2 reads the bundled LOBSTER hour and the A-share
    Level-2 folder ``data_dir`` (default: ``shared / "a_share_l2"``).
    """
    from quantgym.data.sse_l2 import write_bundled
    from quantgym.envs.market_bench.config import N_ROUNDS, STRATEGIES, check_task_set
    from quantgym.envs.market_bench.rounds import build_round, manifest_path, round_hashes, write_round
    from quantgym.envs.market_bench.checks import builder_checks

    version = check_task_set(task_set)
    if data_dir is None and version != "v1":
        data_dir = shared / "a_share_l2"
    if not check_only and version == "v1":
        import gzip
        import shutil

        from quantgym.envs.market_bench.data import SOURCE_FILES, SOURCES_DIR

        write_bundled(shared / "quant_arena/intraday/sse_600519_20230207")
        SOURCES_DIR.mkdir(parents=True, exist_ok=True)
        for src, dest in SOURCE_FILES.values():
            if dest.endswith(".gz"):
                with open(shared / src, "rb") as fi, gzip.GzipFile(SOURCES_DIR / dest, "wb", mtime=0) as fo:
                    shutil.copyfileobj(fi, fo)
            else:
                shutil.copyfile(shared / src, SOURCES_DIR / dest)
        # provenance and terms ship with the data (verbatim), so a user of the wheel has them
        shutil.copyfile(shared / "market_bench" / "PROVENANCE.md", SOURCES_DIR.parent / "PROVENANCE.md")
    manifest: dict = {"task_version": version, "rounds": {}}
    for strategy in STRATEGIES:
        for r in range(1, N_ROUNDS + 1):
            rnd = build_round(strategy, r, shared=None if check_only or version != "v1" else shared, task_set=version,
                              data_dir=data_dir)
            report = builder_checks(rnd)
            if not report["ok"]:
                raise SystemExit(f"{strategy} round {r} fails the builder checks: {report['failures']}")
            hashes = round_hashes(rnd) if check_only else write_round(rnd)
            manifest["rounds"][f"{strategy}/round_{r}"] = {"files": hashes, "checks": report}
            print(f"{version} {strategy} round {r}: {rnd.meta['n_rows']} rows, checks ok", file=sys.stderr)
    if check_only:
        shipped = json.loads(manifest_path(version=version).read_text())
        bad = [k for k, v in manifest["rounds"].items()
               if any(shipped["rounds"][k]["files"].get(f) != h for f, h in v["files"].items())]
        if bad:
            raise SystemExit(f"rebuilt rounds differ from the shipped manifest: {bad}")
        print(f"all {version} rounds reproduce the shipped manifest", file=sys.stderr)
    else:
        manifest_path(version=version).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=shared_data_dir(), help="root of the shared raw data")
    ap.add_argument("--check", action="store_true", help="rebuild in memory and compare with the shipped manifest")
    ap.add_argument("--task-set", default="v1", help="task set to build: v1 (default) or v2")
    ap.add_argument("--a-share-dir", type=Path, default=None,
                    help="v2: folder of the A-share Level-2 zips (default: SHARED/a_share_l2)")
    a = ap.parse_args(argv)
    build(a.shared, check_only=a.check, task_set=a.task_set, data_dir=a.a_share_dir)


if __name__ == "__main__":
    main()
