"""``<out>/MANIFEST.json``: every final run record of a results folder (its path, run id and
SHA-256), so that the evidence a report stands on is tamper-evident.

The reproduce targets write it after they train (``reproduce.targets.common.sweep_records``,
``reproduce.targets.all``); ``make report`` checks it before any verdict is computed: a record that
changed, one that is there but not listed (a copied run folder, a record added by hand) and one
that is listed but gone are each refused in one line naming the file, and no report is written.
The manifest is what a reviewer cites: ``results/medium/MANIFEST.json`` lists the records the
shipped ``REPORT.md`` was computed from.

Only final records (``completed``, ``diverged``, ``excluded``) are listed: a sweep still running
in the folder (its records say ``running``) is work in progress, not evidence, and is neither
listed nor refused until its runs end (then ``write`` adds them).

The measurements a post-hoc analysis stores beside a final record (``MEASUREMENT_NAMES``: the
checkpoint measurements of Fig. 6/7, Table 3 and the head-role clusters, the rLLC) are computed
from weights that do not ship, so a clone's report reads them in place of the weights: they are
listed and checked the same way. An analysis that measures local weights during ``make report``
(a machine that trained them) writes such a file; :func:`measurements_listed` adds what the run
itself wrote to a manifest whose records were as listed when it began::

    python -m reproduce.manifest write results/medium   # list the final records there now
    python -m reproduce.manifest check results/medium   # what make report runs first
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from grok_lightning.config import ConfigError, open_regular
from grok_lightning.records import FINAL_STATUSES, RECORD_NAME, record_problem

__all__ = ["MANIFEST_NAME", "MEASUREMENT_NAMES", "check_manifest", "manifest_problems", "measurements_listed",
           "read_manifest", "read_measurements", "scan", "scan_measurements", "write_manifest"]

MANIFEST_NAME = "MANIFEST.json"
#: files an analysis stores beside a run's record, measured from its weights (which do not ship)
MEASUREMENT_NAMES = ("checkpoint_points.json", "rllc_points.json")
ABOUT = ("every final run record below this folder: path (relative to it), run id, SHA-256 of the file; and the "
         "measurements stored beside them (path, SHA-256); written by the reproduce targets (python -m "
         "reproduce.manifest write DIR) and checked by make report before any verdict")


def _read(path: Path) -> tuple[str, dict | None]:
    """``(sha256, record)`` of one record file, read once; ``record`` is ``None`` when the bytes are
    not a valid record (its hash still names what is there)."""
    with open_regular(path, "rb") as handle:
        data = handle.read()
    try:
        record = json.loads(data)
    except (ValueError, RecursionError):
        record = None
    if record is not None and record_problem(record) is not None:
        record = None
    return hashlib.sha256(data).hexdigest(), record


def scan(root: str | Path) -> tuple[dict[str, dict], list[str]]:
    """``({relative path: {"run_id", "sha256"}}, unfinished)`` for the record files below ``root``:
    the final records (and any file that is no valid record: ``run_id`` ``None``; ``sha256``
    ``None`` when it is not even a regular file), and the paths of the records still running or
    interrupted, which are left out."""
    root = Path(root)
    final, unfinished = {}, []
    for path in sorted(root.rglob(RECORD_NAME)):
        relative = path.relative_to(root).as_posix()
        try:
            digest, record = _read(path)
        except ConfigError:  # a folder or a FIFO named record.json: never a record
            final[relative] = {"run_id": None, "sha256": None}
            continue
        if record is not None and record.get("status") not in FINAL_STATUSES:
            unfinished.append(relative)
            continue
        final[relative] = {"run_id": (record or {}).get("run_id"), "sha256": digest, "valid": record is not None}
    return final, unfinished


def scan_measurements(root: str | Path) -> dict[str, str | None]:
    """``{relative path: sha256}`` of the measurement files below ``root`` (``MEASUREMENT_NAMES``),
    but those beside a record still running or interrupted (work in progress, as that record);
    ``sha256`` ``None`` when the path is not a regular file."""
    root = Path(root)
    found = {}
    for name in MEASUREMENT_NAMES:
        for path in sorted(root.rglob(name)):
            beside = path.with_name(RECORD_NAME)
            if beside.is_file() and not beside.is_symlink():
                try:
                    status = json.loads(beside.read_bytes()).get("status")
                except (ValueError, RecursionError, AttributeError):
                    status = None
                if status is not None and status not in FINAL_STATUSES:
                    continue
            try:
                with open_regular(path, "rb") as handle:
                    found[path.relative_to(root).as_posix()] = hashlib.sha256(handle.read()).hexdigest()
            except ConfigError:
                found[path.relative_to(root).as_posix()] = None
    return dict(sorted(found.items()))


def write_manifest(root: str | Path) -> Path:
    """List every final record below ``root`` in ``root/MANIFEST.json`` (atomically replaced); a
    file named like a record that is not a valid one is refused in one line (it is no evidence)."""
    root = Path(root)
    records, _ = scan(root)
    invalid = next((relative for relative, entry in records.items() if not entry.get("valid")), None)
    if invalid is not None:
        raise ConfigError(f"{root / invalid}: not a valid record; fix or remove it before writing the manifest")
    measurements = scan_measurements(root)
    odd = next((relative for relative, digest in measurements.items() if digest is None), None)
    if odd is not None:
        raise ConfigError(f"{root / odd}: not a regular file; remove it before writing the manifest")
    lines = [json.dumps({"path": relative, "run_id": entry["run_id"], "sha256": entry["sha256"]})
             for relative, entry in records.items()]
    measured = [json.dumps({"path": relative, "sha256": digest}) for relative, digest in measurements.items()]
    text = ("{\n" + f' "about": {json.dumps(ABOUT)},\n "records": [\n  ' + ",\n  ".join(lines) + "\n ],\n"
            + ' "measurements": [\n  ' + ",\n  ".join(measured) + "\n ]\n}\n")
    fd, tmp = tempfile.mkstemp(prefix=f".{MANIFEST_NAME}.", suffix=".tmp", dir=root)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, root / MANIFEST_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return root / MANIFEST_NAME


def read_manifest(root: str | Path) -> dict[str, dict]:
    """``{relative path: {"run_id", "sha256"}}`` from ``root/MANIFEST.json``; one line if it is
    missing or not a manifest."""
    path = Path(root) / MANIFEST_NAME
    if not path.exists():
        raise ConfigError(f"{path}: no manifest of the records in {root}; list them with `python -m reproduce.manifest "
                          f"write {root}` (after checking them) or retrain")
    try:
        with open_regular(path) as handle:
            entries = json.load(handle)["records"]
        return {str(e["path"]): {"run_id": e["run_id"], "sha256": str(e["sha256"])} for e in entries}
    except (ValueError, RecursionError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: not a manifest ({type(err).__name__}: {err})") from None


def read_measurements(root: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` of the measurement files ``root/MANIFEST.json`` lists (none in a
    manifest written before it listed them: then every measurement file is an extra one)."""
    path = Path(root) / MANIFEST_NAME
    read_manifest(root)  # one line if it is missing or not a manifest
    with open_regular(path) as handle:
        entries = json.load(handle).get("measurements", [])
    try:
        return {str(e["path"]): str(e["sha256"]) for e in entries}
    except (KeyError, TypeError) as err:
        raise ConfigError(f"{path}: not a manifest ({type(err).__name__}: {err})") from None


def manifest_problems(root: str | Path) -> list[str]:
    """One line per record below ``root`` that differs from its manifest: changed, extra (a final
    record not listed) or missing (listed, gone). Empty when every record is as listed."""
    root = Path(root)
    listed = read_manifest(root)
    found, _ = scan(root)
    problems = []
    for relative, entry in listed.items():
        if relative not in found:
            gone = "missing" if not (root / relative).exists() else "no longer final"
            problems.append(f"{root / relative}: {gone}: the manifest lists run {entry['run_id']} here")
        elif found[relative]["sha256"] != entry["sha256"]:
            problems.append(f"{root / relative}: changed since the manifest was written (run {entry['run_id']}: "
                            f"SHA-256 {found[relative]['sha256']}, listed {entry['sha256']})")
    for relative, entry in found.items():
        if relative not in listed:
            what = f"run {entry['run_id']}" if entry["sha256"] else "not a regular file"
            problems.append(f"{root / relative}: an extra record ({what}) that the manifest does not list")
    return problems + _measurement_problems(root, read_measurements(root), scan_measurements(root))


def _measurement_problems(root: Path, listed: dict[str, str], found: dict[str, str | None]) -> list[str]:
    problems = []
    for relative, digest in listed.items():
        if relative not in found:
            problems.append(f"{root / relative}: missing: the manifest lists this measurement file here")
        elif found[relative] != digest:
            problems.append(f"{root / relative}: changed since the manifest was written (measurements: SHA-256 "
                            f"{found[relative]}, listed {digest})")
    for relative in found:
        if relative not in listed:
            problems.append(f"{root / relative}: an extra measurement file that the manifest does not list "
                            f"(python -m reproduce.manifest write {root}, once checked)")
    return problems


@contextmanager
def measurements_listed(root: str | Path, checked: bool = False):
    """Around analyses that may store measurements of local weights in ``root`` (``make report`` on
    the machine that trained them): when ``root``'s manifest matched before, list afterwards the
    measurement files the analyses wrote or rewrote. A manifest that did not match is left as it
    is, so nothing found before is ever listed by this. ``checked``: the caller has just passed
    :func:`check_manifest` on ``root`` (its records are not hashed a second time)."""
    root = Path(root)
    matched = checked or ((root / MANIFEST_NAME).is_file() and not manifest_problems(root))
    before = scan_measurements(root) if matched else None
    yield
    if matched and scan_measurements(root) != before:
        write_manifest(root)
        print(f"{root / MANIFEST_NAME}: the measurements this run stored are listed", flush=True)


def check_manifest(root: str | Path) -> None:
    """A one-line ``ConfigError`` naming the first record that differs from the manifest (and how
    many more do), or nothing when the records are as listed."""
    problems = manifest_problems(root)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConfigError(f"{problems[0]}{more}; the report is not written from records that differ from "
                          f"{Path(root) / MANIFEST_NAME}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reproduce.manifest", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("write", "check"))
    parser.add_argument("folder", help="a results folder, e.g. results/medium")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    try:
        if not folder.is_dir():
            raise ConfigError(f"{folder}: no such folder")
        if args.action == "write":
            path = write_manifest(folder)
            print(f"{path}: {len(read_manifest(folder))} final records")
        else:
            check_manifest(folder)
            print(f"{folder / MANIFEST_NAME}: every record as listed ({len(read_manifest(folder))})")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
