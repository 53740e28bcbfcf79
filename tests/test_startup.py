"""Start-up stays cheap: ``import quantgym`` and ``quantgym --help`` load no heavy library.

Each check runs a fresh interpreter and asserts the set of modules loaded, not a time (timings on a
shared CI machine are noise). The ids are still registered: right after ``gymnasium`` is imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "scipy", "matplotlib", "torch")


def _run(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_import_quantgym_loads_no_heavy_library():
    out = _run("import quantgym, sys; print(sorted(m for m in %r if m in sys.modules))" % (HEAVY,))
    assert out == "[]"


def test_cli_help_loads_no_heavy_library_nor_numpy_or_gymnasium():
    code = ("import sys, contextlib, io; sys.argv = ['quantgym', '--help']\n"
            "from quantgym.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main()\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in %r if m in sys.modules))" % (HEAVY + ("numpy", "gymnasium"),))
    assert _run(code) == "[]"


def test_ids_are_registered_once_gymnasium_is_imported():
    from quantgym.tasks import env_ids

    ENV_SPECS = env_ids()
    code = ("import quantgym\nimport gymnasium as gym\n"
            "print(sorted(i for i in %r if i not in gym.registry))" % (sorted(ENV_SPECS),))
    assert _run(code) == "[]"
    code = ("import gymnasium as gym\nimport quantgym\n"
            "print(sorted(i for i in %r if i not in gym.registry))" % (sorted(ENV_SPECS),))
    assert _run(code) == "[]"
