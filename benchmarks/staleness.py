"""Is a measured figure in docs/performance.md still a figure of the code it names?

Every speed block of docs/performance.md is rendered from a committed result file that records the commit the
benchmark ran at (``benchmarks/results/<block>.json``, ``run_all.json``, ``perf-llm-throughput.json``). A
figure is *current* when none of the files that the benchmark times changed between that commit and HEAD
(``git diff --name-only COMMIT HEAD -- PATHS``) and the measurement did not run on uncommitted changes of those
files (a commit recorded as ``abc1234+dirty``). A stale block is re-measured with the command it names, at a
commit, and its result file committed after.

    python benchmarks/staleness.py            # one line per block; exit 1 when one is stale

``WATCHED`` lists, per block, the code its benchmark times; tests/test_docs_generated.py runs the check in CI.
It needs a git checkout with the history back to the measured commits (a clone; not a shallow clone or an
sdist): where it cannot tell, it says so and exits 0 with ``unknown``.

Blocks that record one past run rather than the speed of the code at HEAD are not watched: ``rl-table-speed``
(the training time of the committed RL table, a run of 1.3 hours at the commit the table names, like the
table itself) and ``bl-readings`` (a result table, not a speed figure).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

_PB = ("quantgym/envs/portbench", "quantgym/jit.py", "quantgym/spaces.py", "quantgym/costs.py")
_QA = ("quantgym/envs/quant_arena", "quantgym/sandbox", "quantgym/jit.py", "quantgym/costs.py")
_MB = ("quantgym/envs/market_bench", "quantgym/sandbox", "quantgym/jit.py")
_B = "benchmarks/"

#: block -> (result file, the code its benchmark times: directories or files, relative to the repository)
WATCHED: dict[str, tuple[str, tuple[str, ...]]] = {
    "perf-tools": ("perf-tools.json", (*_PB, "quantgym/tools.py", "quantgym/blind.py", _B + "bench_tools.py")),
    "perf-quant-arena": ("perf-quant-arena.json", (*_QA, _B + "bench_quant_arena.py")),
    "perf-market-bench": ("perf-market-bench.json", (*_MB, _B + "bench_market_bench.py")),
    "perf-blind-prompts": ("perf-blind-prompts.json", (*_PB, "quantgym/blind.py", _B + "bench_blind_prompts.py")),
    "perf-main-job": ("perf-main-job.json", ("quantgym", ":(exclude)quantgym/sweep", ":(exclude)quantgym/integrations",
                                             "pyproject.toml", _B + "bench_main_job.py")),
    "perf-llm-throughput": ("perf-llm-throughput.json",
                            ("quantgym/plan.py", "quantgym/evaluation.py", "quantgym/agents", "quantgym/envs/portbench",
                             "quantgym/blind.py", _B + "bench_llm_throughput.py")),
    # the blocks of run_all.py: perf-headline, perf-details, perf-scaling, perf-pb-scaling, perf-before-after
    "run_all": ("run_all.json", (*_PB, *_QA, *_MB, *(_B + s for s in (
        "run_all.py", "bench_portbench_steps.py", "bench_peers_gyms.py", "bench_peers_vectorbt.py",
        "bench_market_bench.py", "bench_portbench_scaling.py", "bench_quant_arena.py", "bench_before_after.py",
        "bench_portbench_vec.py")))),
}


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def changed_since(commit: str, paths: tuple[str, ...]) -> list[str] | None:
    """Files under ``paths`` that differ between ``commit`` and HEAD; None when git cannot tell (no checkout, or
    ``commit`` is not in its history)."""
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        return None
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return None
    p = _git("diff", "--name-only", commit, "HEAD", "--", *paths)
    return None if p.returncode != 0 else [x for x in p.stdout.splitlines() if x]


def dirty(paths: tuple[str, ...]) -> bool:
    """True when the working tree has uncommitted changes under ``paths`` (a measurement now would not be of
    any commit)."""
    p = _git("status", "--porcelain", "--untracked-files=no", "--", *paths)
    return p.returncode == 0 and bool(p.stdout.strip())


def status(block: str) -> tuple[str, str]:
    """(``current`` | ``stale`` | ``unknown`` | ``missing``, a one-line reason) for a block of ``WATCHED``."""
    name, paths = WATCHED[block]
    path = RESULTS / name
    if not path.exists():
        return "missing", f"no {path.relative_to(ROOT)}"
    commit = str(json.loads(path.read_text()).get("commit") or "")
    if not commit:
        return "stale", f"{name} records no commit"
    if commit.endswith("+dirty"):
        return "stale", f"measured at {commit}: uncommitted changes, not a commit"
    changed = changed_since(commit, paths)
    if changed is None:
        return "unknown", f"measured at {commit}; git cannot compare it with HEAD here"
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return "stale", f"measured at {commit}; changed since: {', '.join(changed[:3])}{more}"
    return "current", f"measured at {commit}; the code it times is unchanged"


def main() -> int:
    rc = 0
    for block in WATCHED:
        state, why = status(block)
        how = {"run_all": "python benchmarks/run_all.py",
               "perf-llm-throughput": "python benchmarks/bench_llm_throughput.py"}.get(
                   block, f"python benchmarks/docs_tables.py --measure {block}")
        line = f"{block}: {state}, {why}"
        if state in ("stale", "missing"):
            rc = 1
            line += f"; re-measure with `{how}` at a commit"
        print(line)
    return rc


if __name__ == "__main__":
    sys.exit(main())
