"""``quantgym train``: train an SB3 agent on PortBench's training split and evaluate it on the bench periods.

Plugin of :mod:`quantgym.cli` (``register(app)``). Importing this module imports neither
stable-baselines3 nor torch: they are imported inside the command (extra ``rl``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from quantgym.envs.portbench.config import BENCH_PERIODS
from quantgym.envs.portbench.rl import RL_INSTALL, TORCH_CPU_HINT


def _split(v: Optional[str]) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def missing_extra_message(exc: ImportError) -> str:
    """The one-line message of ``quantgym train`` when stable-baselines3 / torch cannot be imported."""
    what = getattr(exc, "name", None) or str(exc)
    return (f"quantgym train needs the 'rl' extra (stable-baselines3, torch): {RL_INSTALL}; "
            f"{TORCH_CPU_HINT} ({what} missing)")


def cuda_build_note() -> str | None:
    """One line when the installed torch is a CUDA build but no GPU is usable here, else None."""
    import torch

    cuda = getattr(torch.version, "cuda", None)
    if cuda and not torch.cuda.is_available():
        return (f"note: torch {torch.__version__} is a CUDA {cuda} build but this machine has no usable GPU: "
                f"training runs on the CPU; {TORCH_CPU_HINT} saves about 5 GB")
    return None


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to ``app``."""

    @app.command("train")
    def train_cmd(  # noqa: PLR0913 - a CLI
        algo: str = typer.Option("ppo", "--algo", help="ppo | sac | a2c (stable-baselines3)."),
        env: str = typer.Option("PortBench-Balanced-v0", "--env", "-e", help="PortBench allocation env id."),
        timesteps: int = typer.Option(100_000, "--timesteps", "-n", help="Environment steps (all envs)."),
        seed: int = typer.Option(0, "--seed", help="Seed of SB3 (torch, numpy) and of the training episode draws."),
        out: Path = typer.Option(Path("results/train"), "--out", "-o", help="Output folder: model.zip, rl_meta.json, "
                                 "summary.csv, results.json."),
        train_period: str = typer.Option("2016-01-01:2023-12-31", "--train-period", help="START:END of the training "
                                         "data; the evaluation periods (and --exclude) are cut out of it."),
        exclude: Optional[str] = typer.Option(None, "--exclude", help="Further periods to keep out of training "
                                              "(comma-separated names)."),
        eval_periods: str = typer.Option(",".join(BENCH_PERIODS), "--eval-periods",
                                         help="Periods evaluated after training (comma-separated)."),
        reward: str = typer.Option("log_return", "--reward", help="log_return | risk_adjusted | ceps (docs/rl.md)."),
        risk_penalty: float = typer.Option(1.0, "--risk-penalty", help="κ >= 0 of the risk_adjusted reward."),
        action_mode: str = typer.Option("logits", "--action-mode", help="logits (softmax) | weights."),
        n_envs: int = typer.Option(8, "--n-envs", help="Parallel training episodes."),
        episode_len: int = typer.Option(26, "--episode-len", help="Decisions per training episode."),
        freq: str = typer.Option("weekly", "--freq", help="Training decision frequency: daily | weekly | monthly."),
        algo_kwargs: Optional[str] = typer.Option(None, "--algo-kwargs", help="JSON object of SB3 hyperparameters."),
        verbose: int = typer.Option(0, "--verbose", "-v", help="SB3 verbosity (0, 1, 2)."),
        tools: bool = typer.Option(False, "--tools", help="Train on the tool interface (docs/tools.md): the policy "
                                   "calls point-in-time tools or answers each stage; reward log_return or ceps."),
    ) -> None:
        """Train PPO/SAC/A2C on PortBench, save the model, evaluate it like the baselines.

        Trains on the training split without the evaluation periods, saves the model, then evaluates it
        with the same loop as the baselines on normal_2024 and the three stress windows."""
        from rich.console import Console

        from quantgym.cli_errors import check_out_dir, fail
        from quantgym.envs.portbench.allocation import check_risk_penalty

        console = Console()
        # every bad input is one line on stderr, exit 2, before anything is trained or written
        for flag, v in (("--timesteps", timesteps), ("--n-envs", n_envs), ("--episode-len", episode_len)):
            if v < 1:
                fail(f"{flag} must be an integer >= 1, got {v}")
        try:
            check_risk_penalty(risk_penalty)
        except ValueError as exc:
            fail(f"--risk-penalty: {exc}")
        start, sep, end = train_period.partition(":")
        if not sep or not start or not end:
            fail(f"--train-period must be START:END, e.g. 2016-01-01:2023-12-31, got {train_period!r}")
        try:
            kwargs = json.loads(algo_kwargs) if algo_kwargs else None
        except ValueError as exc:
            fail(f"--algo-kwargs is not JSON ({exc}); give an object, e.g. '{{\"n_steps\": 128}}'")
        if kwargs is not None and not isinstance(kwargs, dict):
            fail(f"--algo-kwargs must be a JSON object of SB3 hyperparameters, e.g. '{{\"n_steps\": 128}}', "
                 f"got {algo_kwargs!r}")
        check_out_dir(out)
        try:
            from quantgym.envs.portbench.rl import sb3 as rl
        except ImportError as exc:
            # markup=False: rich would otherwise swallow "[rl]" as a style tag
            console.print(missing_extra_message(exc), markup=False, highlight=False, soft_wrap=True, style="red")
            raise typer.Exit(2) from None
        note = cuda_build_note()
        if note:
            console.print(note, markup=False, highlight=False, soft_wrap=True, style="yellow")
        try:
            with console.status(f"training {algo.upper()} on {env} for {timesteps} steps"):
                res = rl.train_sb3(algo, env, timesteps, seed, out, train_period=(start, end), exclude=_split(exclude),
                                   reward=reward, risk_penalty=risk_penalty, action_mode=action_mode,
                                   eval_periods=_split(eval_periods), algo_kwargs=kwargs, n_envs=n_envs,
                                   episode_len=episode_len, freq=freq, verbose=verbose, tools=tools)
        except ValueError as exc:
            fail(exc)
        from quantgym.envs.portbench.config import SHARPE_NOTE
        from quantgym.tables import Col, print_table

        trained = res["section"].extra["training"]["timesteps_trained"]  # whole rollouts: may exceed --timesteps
        print_table(console, f"{res['policy'].name} on {env} ({trained} steps in {res['train_seconds']:.1f} s, "
                    f"seed {seed})",
                    [Col("period", "left"), Col("Sharpe"), Col("Ret%"), Col("MaxDD%", short="MDD%"), Col("Vol%"),
                     Col("CEPS"), Col("gate", "center")],
                    [[r.period, *(("" if v is None else f"{v:.3f}") for v in (r.sharpe, r.ret_pct, r.maxdd_pct, r.vol_pct,
                                                                             r.ceps)),
                      "" if r.gate is None else ("✓" if r.gate else "✗")] for r in res["section"].rows],
                    caption="training windows: " + ", ".join(f"{a}..{b}" for a, b in res["windows"])
                    + f". {SHARPE_NOTE}.")
        console.print(f"model: {res['model_path']}  results: {res['out_dir']}/summary.csv, results.json  "
                      f"(bench beside the baselines: quantgym bench --agent sb3:{res['out_dir']})")
