"""Gavel's Figure 8 study as one command, timed: `shockwave sweep examples/gavel_figure8.toml` (the LAS policies,
3 seeds x 8 input job rates on 36:36:36, window 4000:5000). The goal is at most 30 minutes on 2 cores; the reference
simulator takes 1-10 minutes per run at window 400:600, "hours to days" for the study.

    python benchmarks/gavel_figure8.py [--out results/gavel_figure8] [--workers 2]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

SPEC = Path(__file__).resolve().parents[1] / "examples" / "gavel_figure8.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/gavel_figure8"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="reuse finished cells in --out (not a timing then)")
    args = parser.parse_args()
    if args.out.exists() and not args.keep:
        shutil.rmtree(args.out)
    started = time.perf_counter()
    command = [sys.executable, "-m", "shockwave", "sweep", str(SPEC), "--out", str(args.out)]
    done = subprocess.run([*command, "--jobs-in-parallel", str(args.workers)], check=False)
    minutes = (time.perf_counter() - started) / 60
    verdict = "within" if minutes <= 30 else "over"
    print(f"Figure 8 study: {minutes:.1f} minutes on {args.workers} workers ({verdict} the 30-minute goal)")
    print(f"figure: {args.out / 'figures' / 'load.png'}")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
