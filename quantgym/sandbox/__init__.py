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

__all__ = [
    "DEFAULT_ALLOWED_IMPORTS",
    "SANDBOX_VERSION",
    "STATUSES",
    "SandboxLimits",
    "SandboxOutputError",
    "SandboxResult",
    "run_in_sandbox",
]
