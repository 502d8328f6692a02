"""`make reproduce-all`: every reproduced figure in turn, then reproduction/REPORT.md.

    python -m reproduce.all --profile smoke|paper --out reproduction
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

from reproduce.common import launch_argv, parse_args
from reproduce.report import write_report

#: targets in the order they run (each is reproduce/<name>.py with main(argv)); predict reads the
#: Fig. 5 and Fig. 1 sweeps, rllc the long_horizon checkpoints
TARGETS = ["canonical", "fig5", "fig1", "predict", "fig11", "fig9", "fig2", "fig8", "fig4", "fig10", "long_horizon",
           "lockin", "rllc"]


def main(argv=None) -> Path:
    args = parse_args(__doc__, argv)
    timings = {}
    forwarded = ["--profile", args.profile, "--out", args.out] + launch_argv(args)
    for name in TARGETS:
        start = time.time()
        print(f"== {name} ({args.profile}) ==", flush=True)
        importlib.import_module(f"reproduce.{name}").main(forwarded)
        timings[name] = time.time() - start
        print(f"== {name}: {timings[name]:.0f} s ==", flush=True)
    report = write_report(Path(args.out), timings, args.profile)
    print(f"report: {report}")
    for name, seconds in timings.items():
        print(f"  {name:12s} {seconds:7.0f} s")
    return report


if __name__ == "__main__":
    main()
