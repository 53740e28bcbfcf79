"""Process sandbox for untrusted agent code (Quant-Arena scoring functions, Market-Bench backtesters).

See ``docs/security.md`` for what it guarantees and what it does not.

Example
-------
>>> from quantgym.sandbox import run_in_sandbox, SandboxLimits
>>> r = run_in_sandbox("def score(x):\\n    return x * 2\\n", "quantgym.sandbox.runners:call_function",
...                    {"function": "score", "args": [21]}, SandboxLimits(cpu_seconds=5, wall_seconds=30))
>>> r.status, r.value
('ok', 42)
"""

from quantgym.sandbox._host import run_in_sandbox
from quantgym.sandbox._types import (
    DEFAULT_ALLOWED_IMPORTS,
    SANDBOX_VERSION,
    STATUSES,
    SandboxLimits,
    SandboxOutputError,
    SandboxResult,
)



def close_warm_parents() -> None:
    """Stop this process's warm sandbox parents (the zygotes that runs fork from; docs/security.md, "Warm start"),
    killing any child still running. The next sandboxed run starts a new one. A no-op when none was started.
    Called at interpreter exit anyway; call it to reap them earlier, e.g. to count their CPU time with a section."""
    import sys

    zygote = sys.modules.get("quantgym.sandbox._zygote")  # not imported: nothing was started
    if zygote is not None:
        zygote.close_all()


__all__ = [
    "DEFAULT_ALLOWED_IMPORTS",
    "SANDBOX_VERSION",
    "STATUSES",
    "SandboxLimits",
    "SandboxOutputError",
    "SandboxResult",
    "close_warm_parents",
    "run_in_sandbox",
]
