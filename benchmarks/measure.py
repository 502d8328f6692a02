"""Time one command and record it in benchmarks/measurements.json, which the docs render from.

    python benchmarks/measure.py make-report --fresh-clone -- make report PROFILE=medium
    python benchmarks/measure.py make-test --fresh-clone -- make test
    python benchmarks/measure.py make-demo -- make demo
    python benchmarks/measure.py make-report --fresh-clone --venv .venv -- make -o .venv/.installed -o install report PROFILE=medium

Runs the command (in a fresh clone of this repository's HEAD with ``--fresh-clone``: install
included, nothing cached; with ``--venv PATH`` the clone uses that environment instead, linked as its
``.venv`` and with the clone first on ``PYTHONPATH``, so the install is not part of the time), then
writes one entry under ``ID``: the command, wall seconds, user +
system CPU seconds of the command and its children, their peak resident memory, pytest's tally
when the output ends with one, the date, the commit, the cores and the load average at the start,
``reproduce all``'s wall and CPU seconds per target when it prints them,
and whether the tree was clean afterwards (``git status --porcelain``). An entry of the same id is
replaced. The README's and docs/performance.md's measured numbers are rendered from this file
(``reproduce.report.prose``), each with its command beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEASUREMENTS = REPO / "benchmarks" / "measurements.json"
#: ``python -m reproduce all``'s line per target, e.g. "== fig5: 307 s wall, 605 CPU-s =="
TARGET_TIME = re.compile(r"^== (?P<name>[\w.-]+): (?P<wall>\d+) s wall, (?P<cpu>\d+) CPU-s ==$", re.MULTILINE)
#: pytest's last line, e.g. "1013 passed, 9 skipped in 685.10s (0:11:25)"
PYTEST_TALLY = re.compile(r"=+ (?P<tally>[^=]*?) in (?P<seconds>[\d.]+)s")


def _git(*args, cwd=REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def pytest_tally(output: str) -> dict:
    """``{"passed": 1013, "skipped": 9, "pytest_s": 685.1}`` from pytest's summary line ({} without one).

    >>> pytest_tally("===== 1013 passed, 9 skipped in 685.10s (0:11:25) =====")
    {'passed': 1013, 'skipped': 9, 'pytest_s': 685.1}
    """
    found = PYTEST_TALLY.findall(output)
    if not found:
        return {}
    tally, seconds = found[-1]
    out = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", tally)}
    return {**out, "pytest_s": float(seconds)}


def target_times(output: str) -> dict:
    """``{"per_target": {name: {"wall_s", "cpu_s"}}}`` from ``reproduce all``'s lines ({} without any).

    >>> target_times("== fig5 (smoke) ==\\n== fig5: 307 s wall, 605 CPU-s ==\\n")
    {'per_target': {'fig5': {'wall_s': 307, 'cpu_s': 605}}}
    """
    found = {m["name"]: {"wall_s": int(m["wall"]), "cpu_s": int(m["cpu"])} for m in TARGET_TIME.finditer(output)}
    return {"per_target": found} if found else {}


def measure(command: list[str], cwd: Path, env: dict | None = None) -> dict:
    """Run ``command`` in ``cwd``; its wall and CPU time, peak memory and output's pytest tally."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.time()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys.stdout.write(done.stdout[-4000:])
    sys.stderr.write(done.stderr[-4000:])
    clean = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True, text=True).stdout == ""
    return {"wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_gb": round(after.ru_maxrss / 2**20, 2), "exit": done.returncode, "tree_clean_after": clean,
            "load_at_start": round(load, 2), **pytest_tally(done.stdout), **target_times(done.stdout)}


def record(entry_id: str, entry: dict, path: Path = MEASUREMENTS) -> None:
    """Write ``entry`` under ``entry_id`` (replacing an older one), keeping the file's order."""
    data = json.loads(path.read_text()) if path.exists() else {"measurements": {}}
    data["measurements"][entry_id] = entry
    path.write_text(json.dumps(data, indent=1) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], usage="%(prog)s ID [options] -- COMMAND ...")
    parser.add_argument("id", help="the entry's name in measurements.json, e.g. make-test")
    parser.add_argument("--fresh-clone", action="store_true", help="run in a fresh clone of HEAD (install included)")
    parser.add_argument("--venv", default=None, help="with --fresh-clone: link this environment as the clone's .venv")
    parser.add_argument("--what", default="", help="what was measured, in words (default: the command)")
    parser.add_argument("--note", default="", help="what else a reader needs, e.g. 'cores shared with training'")
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        parser.error("no command: give it after --")
    split = argv.index("--")
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    if not command:
        parser.error("no command: give it after --")
    if args.venv and not args.fresh_clone:
        parser.error("--venv goes with --fresh-clone")
    env = None
    with tempfile.TemporaryDirectory() as tmp:
        cwd = REPO
        if args.fresh_clone:
            cwd = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", str(REPO), str(cwd)], check=True)
            if args.venv:  # the link is the clone's only untracked path: keep it out of git status
                (cwd / ".venv").symlink_to(Path(args.venv).resolve())
                with open(cwd / ".git" / "info" / "exclude", "a") as handle:
                    handle.write("/.venv\n")
                env = {**os.environ, "PYTHONPATH": str(cwd)}
        commit = _git("rev-parse", "--short", "HEAD", cwd=cwd)  # what runs, read before: HEAD may move meanwhile
        result = measure(command, cwd, env)
    entry = {"what": args.what or " ".join(command), "command": " ".join(command), "fresh_clone": args.fresh_clone,
             "install_included": args.fresh_clone and not args.venv, **result,
             "date": datetime.date.today().isoformat(), "commit": commit,
             "cores": os.cpu_count(), "note": args.note}
    record(args.id, entry)
    print(json.dumps({args.id: entry}, indent=1))
    sys.exit(result["exit"])


if __name__ == "__main__":
    main()
