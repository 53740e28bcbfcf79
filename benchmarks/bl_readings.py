"""Paper-mode Black–Litterman, 2024, under each reading of the repo's §8.6 code, against the page (§10.2).

    python benchmarks/bl_readings.py                 # print the table
    python benchmarks/bl_readings.py --json OUT      # also write the rows (used by docs_tables.py --measure)

Every other paper flag as in ``PaperFidelity.paper()`` (universe ``89_no_crypto``), direct runner, like
the paper column of ``quantgym reproduce portbench``; one row per ``PaperFidelity.bl_reading``. The
``slsqp`` row depends on the machine's floating-point kernels (SLSQP's line search reports failure or not
on the last bits), so docs/fidelity.md renders the committed result file benchmarks/results/bl-readings.json
and CI never re-measures it.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="write the rows to this file")
    a = ap.parse_args()
    import scipy

    from quantgym.envs.portbench.paper import reproduce as rp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rows = rp.black_litterman_readings()
    print(rp._md(*rp.table_bl_readings(rows)))
    if a.json is not None:
        a.json.write_text(json.dumps({"scipy": scipy.__version__, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
