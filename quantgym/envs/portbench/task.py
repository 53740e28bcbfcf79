"""PortBench's records in the task registry (:mod:`quantgym.tasks`): the staged allocation env and the
static correlation QA layer (spec portbench.md). Imports nothing heavy: every reference is a string."""

from __future__ import annotations

from quantgym.tasks import TaskOption, Task

_ENV = "quantgym.envs.portbench.env:PortBenchEnv"
_VEC = "quantgym.envs.portbench.vector:make_portbench_vector_env"

TASK = Task(
    name="portbench",
    title="PortBench",
    envs={f"PortBench-{p.capitalize()}-v0": (_ENV, {"profile": p}) for p in ("conservative", "balanced", "aggressive")},
    vector_entry_points={f"PortBench-{p}-v0": _VEC for p in ("Conservative", "Balanced", "Aggressive")},
    bench="quantgym.envs.portbench.bench",
    bench_options=(
        TaskOption("--profiles", "profiles", "comma-separated profiles (default: conservative, balanced, aggressive)."),
        TaskOption("--periods", "periods", "comma-separated periods (default: normal_2024, china_2015, covid_2020, "
                    "crypto_2022)."),
        TaskOption("--agents", "agents", "comma-separated baseline names (default: all six)."),
        TaskOption("--agent", "extra_agents", "extra agent evaluated beside the baselines, repeatable: "
                    "openai:MODEL, replay:FILE, sb3:PATH (docs/llm-agents.md, docs/rl.md); run per profile and "
                    "period with full S1-S5 scoring.", kind="multi", metavar="SPEC"),
    ),
    eval="quantgym.envs.portbench.eval:ADAPTER",
    eval_options=(
        TaskOption("--period", "periods", "period(s), comma-separated: normal_2024, china_2015, covid_2020, "
                   "crypto_2022, recent_2025 or START:END[:FREQ] (default normal_2024).", short="-p"),
        TaskOption("--baseline", "baseline", "Equal-Weight beside the agent (default: on).", kind="flag"),
        TaskOption("--after", "after", "YYYY-MM-DD, the model's training cutoff: keep only decision dates "
                   "after it (bundled data).", kind="str", metavar="DATE"),
    ),
    llm="quantgym.envs.portbench.llm:PortBenchLLMAgent",
    report="quantgym.envs.portbench.report:section",
    baselines="quantgym.envs.portbench.baselines:make_baseline",
    schemes={"sb3": "quantgym.envs.portbench.rl:load_sb3_agent"},
    sweep="quantgym.envs.portbench.sweep:HOOKS",
    docs="docs/portbench.md",
    sharpe_note="quantgym.envs.portbench.config:SHARPE_NOTE",
    blind_vocabulary="quantgym.envs.portbench.blinding:blind_vocabulary",
    commands=("quantgym.envs.portbench.rl.cli", "quantgym.envs.portbench.live.cli", "quantgym.envs.portbench.paper.cli"),
)

STATIC_QA_TASK = Task(
    name="portbench_qa",
    title="PortBench-QA",
    envs={"PortBench-QA-v0": ("quantgym.envs.portbench.static_qa.env:PortBenchQAEnv", {})},
    eval_refusal="PortBench-QA-v0 is evaluated with `quantgym qa` (static questions), not `quantgym eval`",
    llm="quantgym.envs.portbench.llm:PortBenchQALLMAgent",
    report="quantgym.envs.portbench.report:static_qa_section",
    docs="docs/qa.md",
    commands=("quantgym.envs.portbench.static_qa.cli",),
)
