"""What the spectral lock-in targets share: the published values (Xu 2026, arXiv 2605.08119,
reference/claims.csv), readers of Tian-run records, and captions built from the
runs' own configs. The targets are reproduce/targets/lockin_main.py (main figure, window sweep),
lockin_activation.py (x^2 vs ReLU) and lockin_eta.py (eta sweep); reproduce/targets/lockin.py runs them.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from grok_lightning.stats.lockin import tian_eta, tian_model
from grok_lightning.sweep.store import SweepStore
from reproduce.report import claim
from reproduce.targets.common import smoke_scope

PAPER = "2605.08119"
#: the parts `--only` runs, in their order; the registry's lock-in figures are four of them (`mp` has none)
PARTS = ("main", "window", "activation", "eta", "mp")
HEADLINE_W = 20
WINDOWS = (5, 10, 20, 30)
T6_EPOCHS = (50, 100, 175, 250, 300)
RHO_THRESHOLD = 0.075

# --- published values (reference/claims.csv) ------------------------------------------------------
#: the protocol of the paper (its claims' n and horizon; rho_tian every epoch), to say what a profile changes
PAPER_PROTOCOL = {
    "main": dict(grok=claim("lock.fire_grok").n, control=claim("lock.fire_control").n,
                 epochs=claim("lock.fire_grok").horizon, rho_every=1),
    "relu": dict(grok=claim("lock.relu_fire").n, control=claim("lock.relu_separation").n - claim("lock.relu_fire").n,
                 epochs=claim("lock.relu_fire").horizon, rho_every=1),
    "eta": dict(seeds=claim("lock.eta0.0002.lockin").n, epochs=claim("lock.eta0.0002.lockin").horizon, rho_every=1)}
#: the published sign-match: 5-seed medians and seed 0, and seed 0's median |cos| of the top pairs
P_SIGN_MEDIAN = {e: claim(f"lock.sign_match_{e}").value for e in T6_EPOCHS}
P_SIGN_SEED0 = {e: claim(f"lock.sign_match_{e}.seed0").value for e in T6_EPOCHS}
P_MEDIAN_ABS_COS = {e: claim(f"lock.median_abs_cos_{e}").value for e in T6_EPOCHS}
#: the published 'ReLU' sign-match of seed 0
P_RELU = dict(sign_match={e: claim(f"lock.relu_sign_{e}").value for e in (100, 300, 500)})
#: the eta sweep: lock-in epoch, rho fire, test = 0.5 (None: never by epoch 600)
P_ETA = {eta: dict(lockin=claim(f"lock.eta{eta:g}.lockin").value, rho=claim(f"lock.eta{eta:g}.rho").value,
                   test=None if claim(f"lock.eta{eta:g}.test").count else claim(f"lock.eta{eta:g}.test").value)
         for eta in (1e-5, 5e-5, 1e-4, 2e-4, 5e-4)}
#: t_rho = slope t_test + intercept
P_ETA_FIT = (claim("lock.eta_fit").value, claim("lock.eta_fit_intercept").value)
P_ETA_LONG = {key: claim(f"lock.long.{key}").value for key in ("test_half", "test_099", "rho", "lockin", "peak")}


# --- reading records ------------------------------------------------------------------------------
def record_seed(record: dict) -> int:
    return int(record["config"].get("seed", 0))


def replays_paper(record: dict | None) -> str:
    """Why our run is the paper's own run repeated ('' when it is not): Tian's training is full
    batch and deterministic, and every profile keeps the paper's configuration (a shorter horizon
    only ends the same trajectory earlier), so our seed 0 is the paper's seed 0 and a gap beyond
    the printed precision is a real difference, not seed noise (``reproduce.report.verdict``). The
    eta = 1e-5 extension does not state its seed; its rows assume 0, as the spec reads it."""
    if record is None or record_seed(record) != 0:
        return ""
    return "seed 0 of the paper's full-batch, deterministic setup: the paper's own run repeated"


def format_number(value) -> str:
    """``format_number(1.0) == '1.000'``, ``format_number(0.000536) == '0.000536'``, ``format_number(229.13) == '229.1'``, ``format_number(174) == '174'``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_number(v) for v in value) + "]"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    if value != 0 and abs(value) < 0.01:
        return f"{value:.3g}"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.4g}"


def fraction(k: int, n: int) -> float | None:
    return k / n if n else None


# --- captions from the runs' configs --------------------------------------------------------------
def run_configs(store_root: Path) -> dict[str, dict]:
    """run_id -> the resolved LightningCLI config the sweep ran (detector settings live there)."""
    try:
        return {entry["run_id"]: entry["config"] for entry in SweepStore(store_root).load_plan()}
    except Exception:  # noqa: BLE001 - a caption without detector settings beats no figure
        return {}


def detector_settings(config: dict | None) -> list[dict]:
    callbacks = ((config or {}).get("trainer") or {}).get("callbacks") or []
    return [dict(c.get("init_args") or {}) for c in callbacks
            if isinstance(c, dict) and str(c.get("class_path", "")).endswith("LockInDetector")]


def value_set(items) -> str:
    unique = []
    for item in items:
        if item not in unique:
            unique.append(item)
    if len(unique) == 1:
        return show_value(unique[0])
    try:
        unique = sorted(unique)
    except TypeError:
        pass
    return "{" + ", ".join(show_value(u) for u in unique) + "}"


def show_value(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    return str(value)


def describe_tian(records: list[dict], configs: dict[str, dict]) -> str:
    """Every hyperparameter of these runs in caption text, read from their records and resolved
    configs (values that differ between runs are listed as sets)."""
    if not records:
        return "no runs"
    m = [tian_model(r) for r in records]
    d = [r["config"].get("data", {}) for r in records]
    M = value_set([x.get("M") for x in m])
    fractions = [x.get("train_fraction") for x in d]
    n_train = value_set([int(round(f * x.get("M") ** 2)) if f is not None else None for f, x in zip(fractions, d)])
    dets = [detector_settings(configs.get(r.get("run_id"))) for r in records]
    det_text = "detector settings not found in the sweep plan"
    if any(dets):
        flat = [x for group in dets for x in group]
        det_text = (f"LockInDetector W = {value_set(sorted({x.get('window') for x in flat}))} on first-layer Delta W, "
                    f"r = sigma2/sigma3 of the W x W Gram, fire = first t >= {value_set([x.get('min_epoch') for x in flat])} "
                    f"with [ln r(t) - ln r(t-{value_set([x.get('slope_span') for x in flat])})]/span > "
                    f"{value_set([x.get('threshold') for x in flat])}, persistence {value_set([x.get('persistence') for x in flat])}")
    t6 = value_set([list(x.get("theorem6_epochs") or ()) for x in m])
    t6_text = (f"Theorem 6 (eta > 0 only) on the top-{value_set([x.get('theorem6_pairs') for x in m])} |cos| pairs "
               f"at epochs {t6}" if t6 != "[]" else "Theorem 6 not computed")
    return (f"a + b mod {M}, n_train = {n_train} of {M}^2 (train fraction {value_set([round(f, 4) for f in fractions])}), "
            f"split and init from the run seed; {value_set([x.get('activation') for x in m])} network "
            f"{value_set([2 * x.get('M') for x in m])} -> {value_set([x.get('hidden') for x in m])} -> {M}, no biases, "
            f"torch default init; class-centred MSE; full-batch torch Adam lr {value_set([x.get('lr') for x in m])}, "
            f"coupled L2 eta in {value_set([tian_eta(r) for r in records])}; 1 step = 1 epoch, metrics before each step; "
            f"horizon {value_set([r['config'].get('max_epochs') for r in records])} epochs; {det_text}; "
            f"rho_tian every {value_set([x.get('rho_every') for x in m])} epoch(s), threshold {RHO_THRESHOLD}; "
            f"{t6_text}; device {value_set([r.get('environment', {}).get('device') for r in records])}, float32")


def differs_from_paper(profile: str, what: str, **ours) -> str:
    """What this profile changes from the paper's protocol (compared, not typed)."""
    paper = PAPER_PROTOCOL[what]
    names = dict(grok="grok seeds", control="control seeds", seeds="seeds per eta", epochs="epochs",
                 rho_every="rho_tian every (epochs)")
    diffs = [f"{names[k]} {ours[k]} (paper {v})" for k, v in paper.items() if k in ours and ours[k] != v]
    return "; ".join(diffs) if diffs else "none in the protocol"


def caption_text(profile: str, runs_text: str, describe: str, differs: str, extra: str = "") -> str:
    text = f"[{profile} profile] {runs_text}\nSetup (from the run configs): {describe}\nDiffers from the paper: {differs}"
    return text + (f"\n{extra}" if extra else "") + smoke_scope(profile, "lockin")


def add_caption(fig: Figure, text: str, fontsize: float = 6.5) -> Figure:
    """Wrapped caption below the axes (saved with ``bbox_inches='tight'``, which keeps it)."""
    width_in = fig.get_size_inches()[0]
    chars = max(60, int(width_in * 72 / (fontsize * 0.52)))
    lines = []
    for paragraph in text.split("\n"):
        lines += textwrap.wrap(paragraph, chars, subsequent_indent="  ") or [""]
    fig.text(0.01, -0.01, "\n".join(lines), ha="left", va="top", fontsize=fontsize, family="monospace")
    return fig


def save_figure(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=130, bbox_inches="tight")
    return path


# --- the late window -----------------------------------------------------------------------------


def fire_list(fires: list) -> str:
    """Each seed's fire epoch, ``-`` for a seed whose detector never fired.

    >>> fire_list([707, None, 639])
    '707, -, 639'
    """
    return ", ".join("-" if f is None else str(f) for f in fires)
