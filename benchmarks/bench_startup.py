"""Start-up time of the command line, side by side with typer itself.

    python benchmarks/bench_startup.py [--repeat 7]

Measures, each in a fresh interpreter, interleaved, the median wall time of: ``python -c "import typer"``,
a bare typer app of ten commands printing its rich ``--help`` (what any typer CLI costs), ``python -c
"import quantgym"`` and ``quantgym --help``; and lists which heavy libraries ``quantgym --help`` loads.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table  # noqa: E402

BARE = '''import typer
app = typer.Typer(no_args_is_help=True, add_completion=False)
for i in range(10):
    def f(x: int = 1):
        """Do a thing."""
    app.command(name=f"cmd{i}")(f)
app()
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.py"
        bare.write_text(BARE)
        cmds = {
            'python -c "import typer"': [sys.executable, "-c", "import typer"],
            "bare typer app --help (10 commands)": [sys.executable, str(bare), "--help"],
            'python -c "import quantgym"': [sys.executable, "-c", "import quantgym"],
            "quantgym --help": [sys.executable, "-c", "from quantgym.cli import main; main()", "--help"],
        }
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.repeat):
            for k, c in cmds.items():
                t0 = time.perf_counter()
                subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                times[k].append(time.perf_counter() - t0)
    base = statistics.median(times['python -c "import typer"'])
    rows = [[k, f"{statistics.median(v) * 1e3:.0f} ms", f"{statistics.median(v) / base:.1f}x import typer"]
            for k, v in times.items()]
    probe = ("import sys, contextlib, io; sys.argv=['quantgym','--help']\nfrom quantgym.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    try: main()\n    except SystemExit: pass\n"
             "print(sorted(m for m in ('numpy','pandas','scipy','matplotlib','torch','gymnasium') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
    rows.append(["heavy modules loaded by quantgym --help", loaded or "?", ""])
    print_table(f"Start-up, median of {args.repeat} interleaved runs", rows)


if __name__ == "__main__":
    main()
