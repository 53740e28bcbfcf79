"""stable-baselines3 training and evaluation on PortBench (imports SB3 and torch; extra ``rl``).

Training never sees the evaluation periods: episodes are drawn (seeded) inside
:func:`quantgym.envs.portbench.training.train_windows` — by default 2016-01-01..2023-12-31 minus
normal_2024 and the three stress windows of spec §2.3, each followed by a 90-day lookback buffer
(no training observation holds evaluation returns) — and the trained policy is then evaluated
with the one evaluation loop :func:`quantgym.evaluation.evaluate` on the bench periods, exactly
like the classical baselines. See docs/rl.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
import stable_baselines3 as sb3_pkg
import torch
from stable_baselines3 import A2C, PPO, SAC
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper, VecMonitor

import quantgym  # noqa: F401 - registers the env ids
from quantgym.cli_errors import one_line
from quantgym.evaluation import EvalResult, evaluate
from quantgym.envs.portbench.config import BENCH_PERIODS, resolve_period
from quantgym.results import SectionResult, write_results
from quantgym.envs.portbench.training import LOOKBACK_BUFFER_DAYS, TRAIN_END, TRAIN_START, RandomPeriod, train_windows
from quantgym.envs.portbench.allocation import AllocationWrapper, check_risk_penalty
from quantgym.envs.portbench.vector import BatchCore, check_num_envs

ALGOS: dict[str, type[BaseAlgorithm]] = {"ppo": PPO, "sac": SAC, "a2c": A2C}
EVAL_PERIODS: tuple[str, ...] = BENCH_PERIODS  #: the periods a trained policy is evaluated on
META_FILE = "rl_meta.json"
MODEL_FILE = "model.zip"


@dataclass(frozen=True)
class TrainConfig:
    """Every **[project choice]** of RL training in one place (docs/rl.md).

    Attributes
    ----------
    freq, episode_len : training episodes: ``episode_len`` consecutive ``freq`` decisions drawn
        uniformly inside the training windows (26 weekly ≈ half a year).
    n_envs : parallel training episodes.
    reward_scale : training rewards are multiplied by this (weekly log returns are ~1e-3; SB3's
        default learning rates and value heads work better near 0.1–1). Evaluation is unaffected.
    net_arch : hidden layers of policy and value networks.
    ppo, sac, a2c : default hyperparameters per algorithm (overridden by ``algo_kwargs``).
    """

    freq: str = "weekly"
    episode_len: int = 26
    n_envs: int = 8
    reward_scale: float = 100.0
    net_arch: tuple[int, ...] = (256, 256)
    ppo: dict = field(default_factory=lambda: {"n_steps": 256, "batch_size": 256, "n_epochs": 10,
                                               "learning_rate": 3e-4, "gamma": 0.99, "gae_lambda": 0.95})
    sac: dict = field(default_factory=lambda: {"batch_size": 256, "learning_rate": 3e-4, "gamma": 0.99})
    a2c: dict = field(default_factory=lambda: {"n_steps": 16, "learning_rate": 7e-4, "gamma": 0.99})
    torch_threads: int = 1  # torch intra-op threads (process-wide): small MLPs on a shared 2-core box run
    # ~10x faster single-threaded than oversubscribed, and results do not depend on the thread count
    version: str = "quantgym-rl-1.0"


# --------------------------------------------------------------------------------------- VecEnvs
class PortBenchSB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` over the batched core of :class:`~quantgym.envs.portbench.vector.PortBenchVectorEnv`.

    Same observations, actions and rewards as ``AllocationWrapper(RandomPeriod(gym.make(id)))`` per
    sub-env (no S1–S5 scoring); SB3 autoreset semantics (``terminal_observation`` in ``infos``;
    ``TimeLimit.truncated`` True for an episode cut at ``episode_len`` inside its window).
    Sub-env ``i`` draws its episodes from ``np.random.default_rng(seed + i)``.
    """

    def __init__(self, num_envs: int, profile: str = "balanced", reward: str = "log_return",
                 action_mode: str = "logits", windows: Sequence[tuple[str, str]] | None = None,
                 freq: str = "weekly", episode_len: int = 26, risk_penalty: float = 1.0, period: Any = "normal_2024",
                 data: Any = None, config: Any = None):
        from gymnasium import spaces

        from quantgym.envs.portbench.allocation import observation_bounds

        self.core = BatchCore(num_envs, profile, period, reward, action_mode, windows, freq, episode_len,
                               risk_penalty, data, config)
        self.core.render_mode = None
        n = self.core.N
        lo, hi = observation_bounds(n)
        obs_space = spaces.Box(lo, hi, dtype=np.float32)
        act_space = (spaces.Box(-1.0, 1.0, (n,), np.float32) if action_mode == "logits"
                     else spaces.Box(0.0, 1.0, (n,), np.float32))
        super().__init__(num_envs, obs_space, act_space)
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        for i, s in enumerate(self._seeds):
            if s is not None:
                self.core.rngs[i] = np.random.default_rng(int(s))
        self.core.reset_envs(range(self.num_envs))
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self.core.obs()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs, -1)

    def step_wait(self):
        n_term = self.core.step(self._actions)
        obs, rew, term = self.core.obs(), self.core.rew.astype(np.float32), self.core.term.copy()
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        if n_term:
            done = np.flatnonzero(term)
            for i in done:
                infos[i]["terminal_observation"] = obs[i].copy()
                infos[i]["TimeLimit.truncated"] = bool(self.core.cut[i])  # cut at episode_len: bootstrap
            self.core.reset_envs(done)
            obs = self.core.obs()
        return obs, rew, term, infos

    def close(self) -> None:
        return None

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        n = len(self._get_indices(indices))
        return [getattr(self.core, attr_name)] * n

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        setattr(self.core, attr_name, value)

    def env_method(self, method_name: str, *args, indices=None, **kwargs) -> list[Any]:
        raise AttributeError(f"PortBenchSB3VecEnv has no per-env method {method_name!r}")

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._get_indices(indices))


class ScaleReward(VecEnvWrapper):
    """Multiply rewards by ``scale`` (training only; :attr:`TrainConfig.reward_scale`)."""

    def __init__(self, venv: VecEnv, scale: float):
        super().__init__(venv)
        self.scale = float(scale)

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rew, done, infos = self.venv.step_wait()
        return obs, rew * self.scale, done, infos


def allocation_env_ids() -> list[str]:
    """The registered PortBench allocation ids (``PortBench-<Profile>-v0``)."""
    return [k for k, v in gym.registry.items() if k.startswith("PortBench-") and (v.kwargs or {}).get("profile")]


def _profile_of(env_id: str) -> str:
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:  # NameNotFound, VersionNotFound, ...: a multi-line hint; the ids instead
        spec = None
    prof = (spec.kwargs or {}).get("profile") if spec is not None else None
    if prof is None:
        raise ValueError(f"{env_id!r} is not a PortBench allocation env id; choose one of "
                         f"{', '.join(allocation_env_ids())}")
    return prof


def action_mode_of(space: gym.Space, where: Any = "the model") -> str:
    """The :class:`AllocationWrapper` action mode whose action space ``space`` is: ``Box(-1, 1, (N,))``
    is ``"logits"``, ``Box(0, 1, (N,))`` is ``"weights"``; ValueError (one line) for any other space."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box) and len(space.shape) == 1 and np.all(space.high == 1.0):
        if np.all(space.low == -1.0):
            return "logits"
        if np.all(space.low == 0.0):
            return "weights"
    raise ValueError(f"sb3: {where} acts in {space}, which is neither PortBench action space (logits: "
                     "Box(-1, 1, (N,)), weights: Box(0, 1, (N,))); give a model trained on AllocationWrapper")


def make_sb3_vec_env(env_id: str = "PortBench-Balanced-v0", n_envs: int = 8, *, reward: str = "log_return",
                     action_mode: str = "logits", windows: Sequence[tuple[str, str]] | None = None,
                     freq: str = "weekly", episode_len: int = 26, risk_penalty: float = 1.0,
                     batched: bool | None = None, s12: str = "derived", env_kwargs: dict | None = None,
                     tools: bool = False) -> VecEnv:
    """An SB3 ``VecEnv`` of PortBench training episodes (wrapped in ``VecMonitor``).

    Parameters
    ----------
    env_id : a PortBench allocation id.
    n_envs : parallel episodes.
    reward : "log_return" | "risk_adjusted" | "ceps" (the latter needs S1–S5 scoring: one
        :class:`PortBenchEnv` per sub-env in a ``DummyVecEnv``).
    windows : training windows (default :func:`train_windows` ()).
    batched : True = numpy batch core (fast, no scoring); False = ``DummyVecEnv`` of
        ``AllocationWrapper(RandomPeriod(gym.make(env_id)))``; None = batched unless ``reward="ceps"``.
    env_kwargs : extra kwargs for ``gym.make`` (unbatched path) or the core (``data``, ``config``).
    tools : True trains on the tool interface: ``ToolUsingAllocation(RandomPeriod(gym.make(env_id,
        stagewise=True, tools=True)))`` per sub-env (docs/tools.md, "RL policies on the tool interface"); reward
        "log_return" or "ceps" (the env's), action mode "logits".

    Raises
    ------
    ValueError
        ``batched=True`` with ``reward="ceps"`` or ``tools``, or an unknown option.
    """
    n_envs = check_num_envs(n_envs, "n_envs")
    check_risk_penalty(risk_penalty)
    windows = list(windows) if windows is not None else train_windows()
    kw = dict(env_kwargs or {})
    if tools:
        if batched or reward not in ("log_return", "ceps") or action_mode != "logits":
            raise ValueError("tools=True trains one tool-mode env per worker: reward log_return or ceps, "
                             "action_mode logits, not batched")
        from quantgym.envs.portbench.rl.tools import ToolUsingAllocation

        def tool_factory() -> Callable[[], gym.Env]:
            def _make() -> gym.Env:
                env = gym.make(env_id, stagewise=True, tools=True, scoring=reward == "ceps", reward=reward, **kw)
                return ToolUsingAllocation(RandomPeriod(env, windows, freq=freq, episode_len=episode_len))
            return _make

        return VecMonitor(DummyVecEnv([tool_factory() for _ in range(n_envs)]))
    if batched is None:
        batched = reward != "ceps"
    if batched:
        if reward == "ceps":
            raise ValueError("reward='ceps' needs S1-S5 scoring: use batched=False")
        venv: VecEnv = PortBenchSB3VecEnv(n_envs, profile=_profile_of(env_id), reward=reward, action_mode=action_mode,
                                          windows=windows, freq=freq, episode_len=episode_len,
                                          risk_penalty=risk_penalty, data=kw.get("data"), config=kw.get("config"))
    else:
        scoring = reward == "ceps"

        def factory() -> Callable[[], gym.Env]:
            def _make() -> gym.Env:
                env = gym.make(env_id, scoring=scoring, reward="log_return", **kw)
                env = RandomPeriod(env, windows, freq=freq, episode_len=episode_len)
                return AllocationWrapper(env, action_mode=action_mode, s12=s12, reward=reward,
                                         risk_penalty=risk_penalty)
            return _make

        venv = DummyVecEnv([factory() for _ in range(n_envs)])
    return VecMonitor(venv)


# --------------------------------------------------------------------------------------- policy
class SB3Policy:
    """A trained SB3 model as a :class:`~quantgym.evaluation.Policy` for PortBench.

    ``wrap_env`` applies :class:`AllocationWrapper` with the training options, ``env_kwargs`` asks
    for S1–S5 scoring (S1/S2 answers derived from the weights), ``act`` is the deterministic
    action of the model.
    """

    direct_allocation = False

    def __init__(self, model: BaseAlgorithm, name: str, action_mode: str = "logits", s12: str = "derived",
                 scoring: bool = True):
        self.model, self.name = model, name
        self.action_mode, self.s12 = action_mode, s12
        self.env_kwargs = {"scoring": bool(scoring), "stagewise": False}

    def wrap_env(self, env: gym.Env) -> gym.Env:
        return AllocationWrapper(env, action_mode=self.action_mode, s12=self.s12)

    def act(self, observation: np.ndarray, info: dict) -> np.ndarray:
        action, _ = self.model.predict(observation, deterministic=True)
        return action


def _model_paths(arg: str | Path) -> tuple[Path, dict]:
    p = Path(arg)
    model = p / MODEL_FILE if p.is_dir() else p
    if not model.exists() and model.with_suffix(".zip").exists():
        model = model.with_suffix(".zip")
    if not model.exists():
        raise ValueError(f"sb3: no model at {arg!r} (expected a {MODEL_FILE} or a directory written by quantgym train)")
    meta_path = model.parent / META_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return model, meta


def load_sb3_agent(arg: str, task: str = "portbench", **options: Any) -> SB3Policy:
    """Agent factory of the ``sb3:PATH`` scheme.

    Parameters
    ----------
    arg : a ``model.zip`` or the output directory of ``quantgym train`` (model.zip + rl_meta.json).
    task : must be "portbench".
    **options : ``algo`` (if no rl_meta.json), ``name``, ``scoring`` (default True), ``torch_threads``
        (default 1; sets torch's process-wide intra-op thread count).

    Raises
    ------
    ValueError
        Another task, a missing file, or an unknown algorithm.
    """
    if task != "portbench":
        raise ValueError(f"sb3 agents exist for PortBench only, not {task!r}")
    model_path, meta = _model_paths(arg)
    torch.set_num_threads(int(options.get("torch_threads", TrainConfig.torch_threads)))
    algo = str(options.get("algo") or meta.get("algo") or "").lower()
    if algo and algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; choose one of {sorted(ALGOS)}")
    candidates = [ALGOS[algo]] if algo else list(ALGOS.values())
    model = None
    errors: list[str] = []
    for cls in candidates:
        try:
            model = cls.load(str(model_path), device="cpu")
            algo = algo or cls.__name__.lower()
            break
        except Exception as exc:  # noqa: BLE001 - try the next algorithm class; every error is kept
            errors.append(f"{cls.__name__}: {type(exc).__name__}: {one_line(exc)[:160]}")
    if model is None:
        raise ValueError(f"sb3: could not load {model_path} ({'; '.join(errors)})")
    name = options.get("name") or meta.get("name") or f"SB3-{algo.upper()}"
    if meta.get("tools"):  # trained on the tool interface (ToolUsingAllocation)
        from quantgym.envs.portbench.rl.tools import ToolPolicy

        return ToolPolicy(model, name)
    # without rl_meta.json the action mode is the one the saved action space belongs to
    mode = meta.get("action_mode") or action_mode_of(model.action_space, model_path)
    return SB3Policy(model, name, action_mode=mode, s12=meta.get("s12", "derived"),
                     scoring=bool(options.get("scoring", True)))


# --------------------------------------------------------------------------------------- train + eval
def evaluate_policy_on_periods(policy: SB3Policy, env_id: str, periods: Sequence[str] = EVAL_PERIODS,
                               data: Any = None) -> tuple[SectionResult, list[EvalResult]]:
    """Evaluate ``policy`` with :func:`evaluate` on each period; rows in the results schema with §7.2 gates."""
    from quantgym.envs.portbench.config import period_gate
    from quantgym.envs.portbench.profiles import PROFILES

    results = []
    for per in periods:
        kw = {"period": per}
        if data is not None:
            kw["data"] = data
        results.append(evaluate(env_id, policy, seed=0, **kw))
    prof = _profile_of(env_id)
    tol = PROFILES[prof].max_drawdown
    mdd = {r.period: r.metrics["max_drawdown"] for r in results}
    section = SectionResult(task="portbench")
    for r in results:
        section.rows.append(r.summary_row(gate=period_gate(r.period, mdd, tol)))
        section.runs.append(r.to_dict())
    return section, results


def train_sb3(algo: str = "ppo", env_id: str = "PortBench-Balanced-v0", timesteps: int = 100_000, seed: int = 0,
              out_dir: str | Path = "results/train", *, train_period: tuple[str, str] = (TRAIN_START, TRAIN_END),
              exclude: Sequence[str] = (), reward: str = "log_return", risk_penalty: float = 1.0,
              action_mode: str = "logits", s12: str = "derived", batched: bool | None = None,
              eval_periods: Sequence[str] = EVAL_PERIODS, algo_kwargs: dict | None = None,
              config: TrainConfig = TrainConfig(), n_envs: int | None = None, episode_len: int | None = None,
              freq: str | None = None, verbose: int = 0, data: Any = None,
              lookback_buffer_days: int = LOOKBACK_BUFFER_DAYS, tools: bool = False) -> dict[str, Any]:
    """Train ``algo`` on the training split, save it, evaluate it on ``eval_periods`` and write results.

    Parameters
    ----------
    algo : "ppo" | "sac" | "a2c".
    env_id : PortBench allocation id (the profile comes from it).
    timesteps : environment steps (summed over the parallel envs).
    seed : seeds SB3 (torch, numpy, action space) and the episode draws (sub-env ``i``: ``seed + i``).
    out_dir : written: ``model.zip``, ``rl_meta.json``, ``summary.csv``, ``results.json``.
    train_period : ``(start, end)`` of the training data; the four bench periods (normal_2024 and the
        three stress windows), ``eval_periods`` and ``exclude`` are cut out of it (:func:`train_windows`),
        so training and evaluation never overlap. Training on data *after* a stress window is not a
        walk-forward test of it; for one, end ``train_period`` before the window starts
        (:func:`~quantgym.envs.portbench.training.walk_forward_windows`, docs/rl.md).
    lookback_buffer_days : calendar days cut after each excluded period so that no training decision's
        60-row lookback holds evaluation returns (default 90, :data:`LOOKBACK_BUFFER_DAYS`).
    reward : "log_return" | "risk_adjusted" | "ceps" (the last one trains on scored envs, slower).
    action_mode, s12, risk_penalty : :class:`AllocationWrapper` options.
    batched : see :func:`make_sb3_vec_env`.
    eval_periods : bench periods to evaluate on (default normal_2024 + the three stress windows).
    algo_kwargs : override :class:`TrainConfig` hyperparameters of ``algo``.
    n_envs, episode_len, freq : override :class:`TrainConfig`.
    data : optional :class:`~quantgym.envs.portbench.data.PortBenchData` (default bundled real data).
    tools : train and evaluate on the tool interface (:class:`~quantgym.envs.portbench.rl.tools.ToolUsingAllocation`,
        see :func:`make_sb3_vec_env`); recorded in ``rl_meta.json``, so ``sb3:DIR`` loads it as a ``ToolPolicy``.

    Returns
    -------
    dict with ``model_path``, ``out_dir``, ``windows``, ``section`` (SectionResult), ``results``
    (list of EvalResult), ``train_seconds``.

    Raises
    ------
    ValueError
        Unknown algo or option; a training window overlapping an evaluation period.
    """
    algo = algo.lower()
    if algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; choose one of {sorted(ALGOS)}")
    if not isinstance(algo_kwargs, (dict, type(None))):
        raise ValueError(f"algo_kwargs must be a dict of {algo.upper()} hyperparameters, got {algo_kwargs!r}")
    _profile_of(env_id)  # an unknown id: one line before anything runs
    torch.set_num_threads(int(config.torch_threads))
    n_envs = check_num_envs(config.n_envs if n_envs is None else n_envs, "n_envs")
    episode_len = int(config.episode_len if episode_len is None else episode_len)
    freq = freq or config.freq
    eval_names = [resolve_period(p).name for p in eval_periods]
    # the four bench periods are always kept out of training (so a model can be benched on all of them later)
    windows = train_windows(train_period[0], train_period[1],
                            exclude=tuple(dict.fromkeys((*EVAL_PERIODS, *eval_names, *exclude))),
                            buffer_days=lookback_buffer_days)
    out = Path(out_dir)
    env_kwargs = {"data": data} if data is not None else None
    venv = make_sb3_vec_env(env_id, n_envs, reward=reward, action_mode=action_mode, windows=windows, freq=freq,
                            episode_len=episode_len, risk_penalty=risk_penalty, batched=batched, s12=s12,
                            env_kwargs=env_kwargs, tools=tools)
    venv = ScaleReward(venv, config.reward_scale)
    kwargs = dict(getattr(config, algo))
    if algo == "sac":
        kwargs.setdefault("buffer_size", int(min(max(timesteps, 1000), 200_000)))
        kwargs.setdefault("learning_starts", int(min(1000, max(timesteps // 10, 100))))
    kwargs.update(algo_kwargs or {})
    policy_kwargs = {"net_arch": list(config.net_arch)}
    if algo in ("ppo", "a2c"):
        policy_kwargs["log_std_init"] = -1.0
    kwargs.setdefault("policy_kwargs", policy_kwargs)
    try:
        model = ALGOS[algo]("MlpPolicy", venv, seed=seed, device="cpu", verbose=verbose, **kwargs)
    except TypeError as exc:  # an unknown hyperparameter name
        raise ValueError(f"algo_kwargs: {one_line(exc)}") from None
    t0 = time.perf_counter()
    model.learn(total_timesteps=int(timesteps))
    train_seconds = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    model_path = out / MODEL_FILE
    model.save(str(model_path))
    meta = {
        # SB3 trains whole rollouts (PPO: n_steps x n_envs), so it may train more steps than requested
        "algo": algo, "env_id": env_id, "timesteps": int(timesteps), "timesteps_trained": int(model.num_timesteps),
        "seed": int(seed), "reward": reward,
        "risk_penalty": risk_penalty, "action_mode": action_mode, "s12": s12, "train_period": list(train_period),
        "train_windows": windows, "lookback_buffer_days": int(lookback_buffer_days), "freq": freq, "episode_len": episode_len, "n_envs": n_envs,
        "reward_scale": config.reward_scale, "hyperparameters": {k: v for k, v in kwargs.items() if k != "policy_kwargs"},
        "net_arch": list(config.net_arch), "eval_periods": eval_names, "train_seconds": train_seconds,
        "config_version": config.version, "versions": {"stable_baselines3": sb3_pkg.__version__,
                                                       "torch": torch.__version__, "numpy": np.__version__},
        "name": f"SB3-{algo.upper()}" + ("-tools" if tools else ""), "tools": bool(tools),
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=1))
    venv.close()
    if tools:
        from quantgym.envs.portbench.rl.tools import ToolPolicy

        policy = ToolPolicy(model, meta["name"])
    else:
        policy = SB3Policy(model, meta["name"], action_mode=action_mode, s12=s12)
    section, results = evaluate_policy_on_periods(policy, env_id, eval_names, data=data)
    section.extra["training"] = meta
    write_results(out, [section], meta={"command": "train", "training": meta})
    return {"model_path": model_path, "out_dir": out, "windows": windows, "section": section, "results": results,
            "train_seconds": train_seconds, "policy": policy}


__all__ = ["ALGOS", "TrainConfig", "action_mode_of", "allocation_env_ids", "PortBenchSB3VecEnv", "ScaleReward", "make_sb3_vec_env", "SB3Policy",
           "load_sb3_agent", "train_sb3", "evaluate_policy_on_periods", "EVAL_PERIODS"]
