"""What the GPU-sized systems this machine does not train would cost on CPU, as the reports state it.

The costs are measured by the pilot ``python -m reproduce.pilots.costs`` (CPU-seconds per epoch of
each system's first paper run, times the paper protocol's runs x epochs) and stored in
``results/pilots/costs/costs.json``; the targets and the medium report read them here, so a
reason such as "compute: LSTM 824 CPU-h measured" is computed from that file, never typed.
"""

from __future__ import annotations

import json
from pathlib import Path

from reproduce.targets.common import REPO
from reproduce.targets.registry import MEDIUM_LEFT_OUT, target

__all__ = ["COSTS", "compute_needed", "costs_table", "load_costs", "medium_left_out"]

COSTS = REPO / "results" / "pilots" / "costs" / "costs.json"


def load_costs(path: Path = COSTS) -> dict:
    """The measured costs (``{}`` before the pilot has run)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def compute_needed(systems: dict[str, str], costs: dict | None = None, detail: bool = True) -> str | None:
    """The reason a report gives for not running ``systems`` (``{system: label}``): the measured
    CPU-hours of the paper's protocol (``detail``: with the per-epoch cost and the protocol's size);
    ``None`` when none of them has been measured.

    >>> c = {"fig10_lstm": {"cpu_s_per_epoch": 7.2, "paper_runs": 70, "paper_epochs": 10000, "paper_protocol_cpu_h": 1400.0}}
    >>> compute_needed({"fig10_lstm": "LSTM", "fig10_mamba": "Mamba"}, c)
    'compute: LSTM 1,400 CPU-h measured (7.2 CPU-s/epoch x 70 runs x 10,000 epochs, results/pilots/costs); Mamba not measured'
    """
    costs = load_costs() if costs is None else costs
    if not any(name in costs for name in systems):
        return None
    parts = []
    for name, label in systems.items():
        c = costs.get(name)
        how = (f" ({c['cpu_s_per_epoch']:.2g} CPU-s/epoch x {c['paper_runs']} runs x {c['paper_epochs']:,} epochs, "
               "results/pilots/costs)") if c is not None and detail else ""
        parts.append(f"{label} not measured" if c is None else f"{label} {c['paper_protocol_cpu_h']:,.0f} CPU-h measured{how}")
    return "compute: " + "; ".join(parts)


def medium_left_out() -> dict[str, str]:
    """The targets the medium pass leaves out, and why (shown in the medium report): the registry's
    :class:`~reproduce.targets.registry.MediumAbsence` of each; a GPU-sized system's reason is the CPU
    time its paper protocol would take, measured (reproduce/pilots/costs.py, read here)."""
    left_out = {}
    for name in MEDIUM_LEFT_OUT:
        why = target(name).medium
        measured = (compute_needed(dict(why.systems)) or why.unmeasured) if why.systems else ""
        left_out[name] = why.reason + measured + why.then
    return left_out


def costs_table(costs: dict | None = None) -> str:
    """The measured costs as a markdown table (docs/medium.md; ``python -m reproduce.pilots.costs --table``)."""
    costs = load_costs() if costs is None else costs
    lines = ["| system | parameters | precision | epochs timed | CPU-s / epoch | paper protocol (runs x epochs) | CPU-h |",
             "|---|---|---|---|---|---|---|"]
    for name, c in costs.items():
        lines.append(f"| {name} | {c['n_params'] / 1e6:.2f} M | {c['precision']} | {c['epochs_timed']} | "
                     f"{c['cpu_s_per_epoch']:.2f} | {c['paper_runs']} x {c['paper_epochs']:,} | {c['paper_protocol_cpu_h']:,.0f} |")
    return "\n".join(lines)
