"""Nothing changes in what users get: `quantgym bench`, `quantgym reproduce portbench` and the
Market-Bench manifest give every number of tests/golden/outputs.json.gz (written by
benchmarks/outputs_check.py from the outputs before the task registry refactor)."""

import pytest
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_every_output_number_is_unchanged():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "outputs_check.py")], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "every number identical" in r.stdout
