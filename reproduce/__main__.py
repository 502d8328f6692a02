"""The reproduction targets of reproduce/targets/registry.py, by name (what `make reproduce-*` runs).

    python -m reproduce list                                    # every target and figure: sweeps, profiles, plots
    python -m reproduce fig5 --profile smoke|medium|paper --out reproduction [--workers N ...]
    python -m reproduce fig3 --profile medium                   # one figure of a target (long_horizon --only fig3)
    python -m reproduce all --profile smoke|medium|paper --out reproduction      # make reproduce-all
    python -m reproduce all --profile medium --out results/medium --no-train --require-manifest   # make report
    python -m reproduce makefile [--write]                      # the Makefile's reproduce-* rules

A target's own flags follow its name (``python -m reproduce fig5 --help``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from reproduce.manifest import measurements_listed
from reproduce.targets.common import REPO, cli
from reproduce.targets.registry import TARGETS, find


def listing() -> str:
    """The registry as a table a person reads: each target, its figures, sweeps, profiles and plots."""
    lines = []
    for t in TARGETS:
        runs = f"make reproduce-{t.name}" if t.make else "make reproduce-all"
        lines.append(f"{t.name:<13} {t.help}  [{'|'.join(t.profiles)}; {runs}]")
        for sweep in t.sweeps:
            lines.append(f"{'':<15}sweep {sweep.file} ({'|'.join(sweep.profiles)})")
        if t.plots:
            lines.append(f"{'':<15}plots {', '.join(t.plots)}")
        for figure in t.figures:
            lines.append(f"{'':<15}{figure.name}: {figure.help} (--only {figure.part}; plots {', '.join(figure.plots)})")
    return "\n".join(lines)


def makefile(argv: list[str]) -> None:
    from reproduce.targets.make import block, write

    parser = argparse.ArgumentParser(prog="python -m reproduce makefile", description="the Makefile's reproduce-* rules")
    parser.add_argument("--write", nargs="?", const=str(REPO / "Makefile"), default=None,
                        help="replace the block in this Makefile (default: the repository's)")
    args = parser.parse_args(argv)
    if args.write:
        print(f"{args.write}: {'rewritten' if write(Path(args.write)) else 'already current'}")
    else:
        print(block(), end="")


def run(name: str, argv: list[str]):
    """Run the target or figure ``name`` with the target's command-line flags ``argv``."""
    if name == "all":
        from reproduce.targets.all import main

        return main(argv)
    try:
        target, figure = find(name)
    except KeyError as err:
        raise SystemExit(f"error: {err.args[0]} (python -m reproduce list)") from None
    sys.argv[0] = f"python -m reproduce {name}"  # the name the target's own --help and errors show
    only = ["--only", figure.part] if figure is not None else []
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--out", default="reproduction")
    with measurements_listed(out.parse_known_args(argv)[0].out):  # what its analysis measured from local weights
        return importlib.import_module(target.module).main(only + argv)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return
    name, rest = argv[0], argv[1:]
    if name == "list":
        print(listing())
    elif name == "makefile":
        makefile(rest)
    else:
        run(name, rest)


if __name__ == "__main__":
    cli(main)
