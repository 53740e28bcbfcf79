"""Public data types of the sandbox (shared by the host and the child process).

This module is imported by the sandbox child before lockdown, so it must stay light:
standard library only (numpy/pandas are imported lazily where needed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Version of the sandbox policy (limits semantics, audit policy, result framing).
SANDBOX_VERSION = "1.1"

#: Top-level module names agent code may import by default (Quant-Arena spec §2 allow-list).
DEFAULT_ALLOWED_IMPORTS: tuple[str, ...] = (
    "numpy",
    "pandas",
    "scipy",
    "math",
    "statistics",
    "collections",
    "itertools",
    "functools",
    "dataclasses",
    "typing",
    "datetime",
)

#: Every status a :class:`SandboxResult` can carry.
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "memory", "forbidden", "bad_output", "crashed")


@dataclass(frozen=True)
class SandboxLimits:
    """Resource and access limits of one sandboxed run.

    Parameters
    ----------
    cpu_seconds : float
        CPU time (user + system, seconds) the child may use *after* its start-up imports
        (``RLIMIT_CPU``, soft limit; the hard limit is one second later). Default 60.
    wall_seconds : float
        Wall-clock seconds from spawning the child until the host kills its whole process group.
        Includes the start-up (~1 s for numpy + pandas + scipy). Default 120.
    memory_mb : int
        Address-space limit of the child in MiB (``RLIMIT_AS``). This counts virtual memory,
        including the ~0.5-1 GiB mapped by numpy/pandas/scipy/OpenBLAS. Default 2048.
    max_output_bytes : int
        Cap on the captured stdout + stderr of the child, in bytes. Excess output is dropped
        (both in the child and in the host reader) and ``SandboxResult.output_truncated`` is set.
        Default 1,000,000.
    allowed_imports : tuple of str
        Top-level module names agent code may import. Default :data:`DEFAULT_ALLOWED_IMPORTS`.
    readable_paths : tuple of str
        Files or directories the child may open read-only after lockdown. Default: none.
    max_result_bytes : int
        Cap on the size of the framed result the host reads back from the child, in bytes.
        A larger result is a ``bad_output``. Default 256,000,000. (Addition to the issue's API.)
    isolate_network : bool
        When the host runs as root and ``unshare --net`` works, start the child in a fresh,
        empty network namespace (kernel-enforced "no network" on top of the audit hook).
        Default True. (Addition to the issue's API.)
    allow_frame_introspection : bool or None
        Whether agent code may read interpreter frames (``sys._getframe``, ``tb_frame``,
        ``gi_frame``, ...). ``None`` (default): the runner decides through its attribute
        ``sandbox_allow_frame_introspection`` (absent = refused). ``False``: refused (status
        ``"forbidden"``). ``True``: allowed, e.g. to test another layer on its own. See
        docs/security.md, "Frame introspection". (Addition to the issue's API.)

    Raises
    ------
    ValueError
        On a non-positive limit or a malformed allow-list.
    """

    cpu_seconds: float = 60.0
    wall_seconds: float = 120.0
    memory_mb: int = 2048
    max_output_bytes: int = 1_000_000
    allowed_imports: tuple[str, ...] = DEFAULT_ALLOWED_IMPORTS
    readable_paths: tuple[str, ...] = ()
    max_result_bytes: int = 256_000_000
    isolate_network: bool = True
    allow_frame_introspection: bool | None = None

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive finite number, got {v!r}")
        for name in ("memory_mb", "max_output_bytes", "max_result_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {v!r}")
        if isinstance(self.allowed_imports, str) or not all(
            isinstance(m, str) and m.isidentifier() for m in self.allowed_imports
        ):
            raise ValueError(
                "SandboxLimits.allowed_imports must be a tuple of top-level module names, "
                f"got {self.allowed_imports!r}"
            )
        if isinstance(self.readable_paths, str) or not all(isinstance(p, str) for p in self.readable_paths):
            raise ValueError(f"SandboxLimits.readable_paths must be a tuple of str, got {self.readable_paths!r}")
        if self.allow_frame_introspection not in (None, True, False):
            raise ValueError("SandboxLimits.allow_frame_introspection must be None, True or False, got "
                             f"{self.allow_frame_introspection!r}")
        object.__setattr__(self, "allowed_imports", tuple(self.allowed_imports))
        object.__setattr__(self, "readable_paths", tuple(str(p) for p in self.readable_paths))


class SandboxOutputError(Exception):
    """Raised by a trusted runner when the agent's output is malformed.

    The sandbox maps it to status ``"bad_output"`` with ``str(exc)`` as the message.
    """


@dataclass
class SandboxResult:
    """Outcome of one :func:`~quantgym.sandbox.run_in_sandbox` call.

    Attributes
    ----------
    status : str
        ``"ok"`` | ``"error"`` (agent code raised, or a syntax error) | ``"timeout"`` (CPU or
        wall limit) | ``"memory"`` | ``"forbidden"`` (blocked import / file / network / process
        / ctypes ...) | ``"bad_output"`` (runner raised :class:`SandboxOutputError`, or the value
        cannot be sent back safely) | ``"crashed"`` (child died otherwise).
    value : Any
        The runner's return value when ``status == "ok"``, else None. Rebuilt in the host from
        a safe (non-pickle) encoding; treat it as untrusted data and validate it.
    message : str
        One human-readable line, starting with the status, e.g.
        ``"forbidden: import of 'socket' is not allowed (allowed: numpy, ...)"``.
    traceback : str or None
        Agent-relevant traceback (trimmed to the agent's frames where possible).
    stdout : str
        Captured stdout + stderr of the child, truncated to ``max_output_bytes``.
    wall_seconds : float
        Wall-clock seconds of the whole run, measured by the host (includes start-up).
    cpu_seconds : float
        CPU seconds (user + system) of the child process, from the kernel's rusage.
    output_truncated : bool
        True when output beyond ``max_output_bytes`` was dropped.
    details : dict
        Extra diagnostics (exit code/signal, max RSS in MiB, isolation used, sandbox version).
    """

    status: str
    value: Any
    message: str
    traceback: str | None
    stdout: str
    wall_seconds: float
    cpu_seconds: float
    output_truncated: bool = False
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the run finished with status ``"ok"``."""
        return self.status == "ok"

    def to_record(self) -> dict:
        """JSON-able record of the run for logs (the value via :func:`quantgym.results.to_jsonable`)."""
        from quantgym.results import to_jsonable

        return {
            "status": self.status,
            "ok": self.ok,
            "message": self.message,
            "traceback": self.traceback,
            "stdout": self.stdout,
            "output_truncated": self.output_truncated,
            "wall_seconds": round(float(self.wall_seconds), 4),
            "cpu_seconds": round(float(self.cpu_seconds), 4),
            "value": to_jsonable(_record_value(self.value)),
            "details": to_jsonable(self.details),
            "sandbox_version": SANDBOX_VERSION,
        }


def _record_value(v: Any, depth: int = 0) -> Any:
    """pandas objects as explicit dicts (index kept) before :func:`quantgym.results.to_jsonable`."""
    if depth > 64:
        return repr(v)[:200]
    mod = getattr(type(v), "__module__", "") or ""
    if mod.startswith("pandas"):
        import pandas as pd

        if isinstance(v, pd.Series):
            return {"index": [str(i) for i in v.index], "values": v.tolist(), "name": v.name}
        if isinstance(v, pd.DataFrame):
            return {"index": [str(i) for i in v.index], "columns": [str(c) for c in v.columns],
                    "data": [v.iloc[:, j].tolist() for j in range(v.shape[1])]}
        if isinstance(v, pd.Index):
            return [str(i) for i in v]
    if isinstance(v, dict):
        return {k: _record_value(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_record_value(x, depth + 1) for x in v]
    return v
