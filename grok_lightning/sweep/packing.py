"""Packing a sweep's runs into vectorised ensembles (``grok-lightning sweep run --ensemble-size E``).

Runs whose configurations differ only in seed and weight decay (and their names, ids and paths;
:func:`grok_lightning.ensembles.compatibility_key`) are grouped, in plan order, into ensemble
tasks of at most E members. An ensemble task trains its members in one process
(:func:`grok_lightning.ensembles.run_ensemble`) and each member writes the record, TensorBoard
events and weight checkpoints of its own run directory, so ``sweep status``, ``collect`` and every
analysis read an ensembled sweep exactly like a plain one.

Resume: the ensemble's checkpoint (``<store>/ensembles/<name>/checkpoints/last.ckpt``) holds all
members. The name is a hash of the members' run ids, so rerunning the same command regroups the
same unfinished runs and resumes them. A run already final is never retrained; if the group
changed (another ``--ensemble-size``, runs finished elsewhere), the new group starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import traceback
from pathlib import Path

from grok_lightning.records import FINAL_STATUSES, RECORD_NAME
from grok_lightning.sweep.nofollow import open_no_follow, remove_inside
from grok_lightning.sweep.rundir import (
    LOG_FILE,
    checkpoint_to_resume,
    clean,
    error_line,
    mark_failed,
    output_to,
    read_record,
    run_summary,
    set_aside,
)

__all__ = ["pack_tasks", "member_tasks", "execute_ensemble"]

MEMBERS_FILE = "members.json"


def member_tasks(task: dict) -> list[dict]:
    """The run tasks inside ``task`` (itself, for a plain run)."""
    return list(task.get("members") or [task])


def pack_tasks(tasks: list[dict], size: int, store_root: str | Path) -> list[dict]:
    """Group compatible run tasks into ensemble tasks of at most ``size`` members (order kept)."""
    from grok_lightning.ensembles import compatibility_key

    if size <= 1:
        return list(tasks)
    groups: dict[str, list[dict]] = {}
    for task in tasks:
        groups.setdefault(compatibility_key(task["config"]), []).append(task)
    packed = []
    for members in groups.values():
        for start in range(0, len(members), size):
            chunk = members[start : start + size]
            if len(chunk) == 1:
                packed.append(chunk[0])
                continue
            digest = hashlib.sha1("+".join(m["run_id"] for m in chunk).encode()).hexdigest()[:12]
            name = f"ensemble-{digest}"
            packed.append({"name": name, "run_id": name, "members": chunk,
                           "run_dir": str(Path(store_root).resolve() / "ensembles" / name),
                           "keep_checkpoints": all(m.get("keep_checkpoints", True) for m in chunk)})
    order = {task["name"]: i for i, task in enumerate(tasks)}
    return sorted(packed, key=lambda t: min(order[m["name"]] for m in member_tasks(t)))


def execute_ensemble(task: dict, capture_output: bool = True) -> dict:
    """Run (or resume) an ensemble task; a summary whose ``members`` are the runs' summaries."""
    ensemble_dir = Path(task["run_dir"])
    ensemble_dir.mkdir(parents=True, exist_ok=True)
    summaries, todo = {}, []
    for member in task["members"]:
        prior = read_record(Path(member["run_dir"]) / RECORD_NAME)
        if prior is not None and prior.get("status") in FINAL_STATUSES:
            summaries[member["name"]] = run_summary(member, prior, skipped=True)
        else:
            todo.append(member)
    if not todo:
        return _ensemble_summary(task, summaries)
    ids = [m["run_id"] for m in todo]
    same_members = _read_members(ensemble_dir) == ids
    ckpt_path, unusable = checkpoint_to_resume(ensemble_dir / "checkpoints" / "last.ckpt") if same_members \
        else (None, None)
    if ckpt_path is None:
        if unusable is not None:  # reported this once: set aside (kept), not deleted
            set_aside(ensemble_dir, ensemble_dir / "checkpoints" / "last.ckpt")
        remove_inside(ensemble_dir, ensemble_dir / "checkpoints")
        for member in todo:
            Path(member["run_dir"]).mkdir(parents=True, exist_ok=True)
            clean(Path(member["run_dir"]))
    with open_no_follow(ensemble_dir / MEMBERS_FILE, "w") as handle:
        handle.write(json.dumps(ids))
    every = min(int((m["config"].get("run") or {}).get("checkpoint_every") or 0) for m in todo)
    interrupted = False
    try:
        with output_to(ensemble_dir / LOG_FILE, capture_output):
            print(f"[grok-lightning sweep] ensemble of {len(todo)}: {', '.join(m['name'] for m in todo)}"
                  + (f" (resuming from {ckpt_path})" if ckpt_path else "")
                  + (f" ({unusable}; restarting from scratch)" if unusable else ""), flush=True)
            from grok_lightning.checkpoint_io import check_ensemble_members
            from grok_lightning.ensembles import run_ensemble

            if ckpt_path is not None:  # the members file says whose it is; the checkpoint must agree
                check_ensemble_members(ckpt_path, ids)
            run_ensemble([m["config"] for m in todo], root=ensemble_dir, ckpt_path=ckpt_path, checkpoint_every=every)
    except (KeyboardInterrupt, SystemExit) as err:  # Lightning turns Ctrl-C into SystemExit(1)
        interrupted = isinstance(err, KeyboardInterrupt) or any(
            (read_record(Path(m["run_dir"]) / RECORD_NAME) or {}).get("status") == "interrupted" for m in todo)
        for member in todo:
            mark_failed(member, "KeyboardInterrupt (Ctrl-C / SIGINT)" if interrupted else "SystemExit in the ensemble",
                        status="interrupted" if interrupted else "failed")
    except BaseException as err:  # noqa: BLE001 - every failure becomes a record, the sweep goes on
        from grok_lightning.checkpoint_io import UnusableCheckpoint

        if ckpt_path is not None and isinstance(err, UnusableCheckpoint):  # it does not fit the members' models
            set_aside(ensemble_dir, Path(ckpt_path))
            return execute_ensemble(task, capture_output)
        for member in todo:
            mark_failed(member, f"{traceback.format_exc().rstrip()}\nerror (ensemble {task['name']}): {error_line(err)}")
    for member in todo:
        record = read_record(Path(member["run_dir"]) / RECORD_NAME)
        if record is not None and record.get("status") == "running":
            record = mark_failed(member, "ensemble ended without a final status for this run")
        summaries[member["name"]] = run_summary(member, record, interrupted=interrupted, resumed_from=ckpt_path,
                                             unusable_checkpoint=unusable)
    if not interrupted and not task.get("keep_checkpoints", True):
        remove_inside(ensemble_dir, ensemble_dir / "checkpoints")
    return _ensemble_summary(task, summaries, interrupted)


def _read_members(ensemble_dir: Path) -> list | None:
    try:
        return json.loads((ensemble_dir / MEMBERS_FILE).read_text())
    except (OSError, ValueError):
        return None


def _ensemble_summary(task: dict, summaries: dict, interrupted: bool = False) -> dict:
    members = [summaries[m["name"]] for m in task["members"]]
    return {"name": task["name"], "run_id": task["run_id"], "status": "ensemble", "members": members,
            "interrupted": interrupted}
