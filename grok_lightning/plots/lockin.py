"""Figures of the spectral lock-in paper (Xu 2026) from run records.

Pure functions: a list of records (dicts with ``config`` and per-epoch ``history`` columns, see
:mod:`grok_lightning.records`) in, a :class:`matplotlib.figure.Figure` out. Figures are built
without pyplot (Agg canvas), so they work headless and leak no global state.

Columns read: ``lockin_w{W}_ratio23`` / ``_ratio12`` (LockInDetector), ``test_acc``, ``rho_tian``,
``sign_match_paper`` / ``sign_match_exact`` (TianModule at the Theorem-6 epochs); top-level
``lockin_fire_epoch_w{W}``. Config keys ``eta`` (or ``wd``), ``activation``, ``seed`` are looked
up in ``config``, then ``config["model"]``.
"""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from grok_lightning.records import rows, series
from grok_lightning.stats.lockin import lockin_key

__all__ = ["main_figure", "window_sweep_figure", "activation_figure", "eta_sweep_figure"]

RHO_THRESHOLD = 0.075


def _cfg(record: dict, key: str, default=None):
    config = record.get("config", {})
    model = config.get("model", {}) if isinstance(config.get("model"), dict) else {}
    model = model.get("init_args", model)
    return config.get(key, model.get(key, default))


def _eta(record: dict) -> float:
    return float(_cfg(record, "eta", _cfg(record, "wd", 0.0)) or 0.0)


def _select(records, activation="x2", grok=None, eta=None):
    out = [r for r in records if _cfg(r, "activation", "x2") == activation]
    if grok is not None:
        out = [r for r in out if (_eta(r) > 0) == grok]
    if eta is not None:
        out = [r for r in out if np.isclose(_eta(r), eta)]
    return out


def _stack(records, key):
    """(epochs, runs x epochs array) aligned on the union of epochs; missing -> NaN."""
    epochs = sorted({e for r in records for e in r["history"].get("epoch", [])})
    index = {e: i for i, e in enumerate(epochs)}
    data = np.full((len(records), len(epochs)), np.nan)
    for row, record in enumerate(records):
        at, values = series(record, key)
        data[row, [index[e] for e in at]] = values
    return np.asarray(epochs), data


def _band(ax, records, key, label, color, log=False, **line):
    """Median over runs with an IQR band; returns nothing when no run has the column."""
    epochs, data = _stack(records, key)
    if not records or np.all(np.isnan(data)):
        return
    # drop epochs no run has (e.g. rho_tian every k epochs): NaN gaps would hide the line
    keep = ~np.all(np.isnan(data), axis=0)
    epochs, data = epochs[keep], data[:, keep]
    with warnings.catch_warnings():  # all-NaN epochs (e.g. before the window fills) are expected
        warnings.simplefilter("ignore", RuntimeWarning)
        mid, lo, hi = (np.nanpercentile(data, q, axis=0) for q in (50, 25, 75))
    ax.plot(epochs, mid, color=color, label=f"{label} (n={len(records)})", **line)
    ax.fill_between(epochs, lo, hi, color=color, alpha=0.2, linewidth=0)
    if log:
        ax.set_yscale("log")


def _fire_epochs(records, window):
    """(fire epochs of the runs that fired, number of runs that carried this window's detector)."""
    key = f"lockin_fire_epoch_w{window}"  # window-specific: a run without the detector is not counted
    carried = [r[key] for r in records if key in r]
    return [v for v in carried if v is not None], len(carried)


def _seeds(records):
    return sorted({_cfg(r, "seed") for r in records if _cfg(r, "seed") is not None})


def _describe(records) -> str:
    """Hyperparameters as recorded (not as hoped): activation, M, K, lr, etas, train fraction."""
    if not records:
        return "no runs"
    first = records[0]
    data = first.get("config", {}).get("data", {})
    etas = ", ".join(f"{e:g}" for e in sorted({_eta(r) for r in records}, reverse=True))
    fraction = data.get("train_fraction")
    return (f"M={_cfg(first, 'M')}, K={_cfg(first, 'hidden')}, Adam lr={_cfg(first, 'lr')}, eta in {{{etas}}}"
            + (f", train fraction {fraction:.4g}" if isinstance(fraction, (int, float)) else ""))


def _horizon(records):
    return max((max(r["history"].get("epoch", [0]) or [0]) for r in records), default=0)


def main_figure(records: list[dict], window: int = 20, profile: str = "paper", note: str = "",
                published_sign_match: dict[int, float] | None = None) -> Figure:
    """sigma2/sigma3 (median, IQR) grok vs control, fire epoch, Theorem-6 sign-match on a twin axis;
    ``published_sign_match`` ({epoch: the paper's median}, given by the caller) drawn as crosses."""
    grok, control = _select(records, grok=True), _select(records, grok=False)
    fig = Figure(figsize=(9, 5.2))
    ax = fig.add_subplot()
    key = lockin_key(window, "ratio23")
    _band(ax, grok, key, "grok (eta>0)", "C0", log=True)
    _band(ax, control, key, "control (eta=0)", "C1", log=True)
    fires, carried = _fire_epochs(grok, window)
    if fires:
        ax.axvline(np.median(fires), color="k", ls="--", lw=1,
                   label=f"slope fire, median {np.median(fires):.0f} ({len(fires)}/{carried} fired)")
    ax.set(xlabel="epoch", ylabel=f"sigma2 / sigma3 (W = {window})")
    twin = ax.twinx()
    for mode, marker in (("paper", "o"), ("exact", "s")):
        epochs, data = _stack(grok, f"sign_match_{mode}")
        keep = ~np.all(np.isnan(data), axis=0)
        if data.size and keep.any():
            twin.plot(epochs[keep], np.nanmedian(data[:, keep], axis=0), marker=marker, color="C3",
                      ls="-" if mode == "paper" else ":", label=f"sign-match, {mode} mode (ours)")
    if published_sign_match:
        twin.plot(*zip(*sorted(published_sign_match.items())), marker="x", ls="none", color="k", ms=8,
                  label="sign-match, published")
    twin.set(ylabel="Theorem-6 sign-match", ylim=(0.5, 1.02))
    lines = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + twin.get_legend_handles_labels()[1]
    ax.legend(lines, labels, fontsize=7, loc="lower right")
    fig.suptitle(f"Spectral lock-in [{profile}] x^2, {_describe(grok + control)}; W={window}; "
                 f"seeds {_seeds(records)}; {_horizon(records)} epochs {note}", fontsize=8)
    fig.text(0.01, 0.005, "paper mode = sgn B_jl = -sgn cos_jl (what the published code measures); exact mode "
             "= Theorem 6 with P_eta,-jl, an identity (1.000).", fontsize=7)
    return fig


def window_sweep_figure(records: list[dict], windows=(5, 10, 20, 30), profile: str = "paper") -> Figure:
    """sigma2/sigma3 for each window size, grok vs control, fire counts in the titles."""
    fig = Figure(figsize=(3.2 * len(windows), 3.4))
    axes = fig.subplots(1, len(windows), sharey=True)
    for ax, w in zip(np.atleast_1d(axes), windows):
        grok, control = _select(records, grok=True), _select(records, grok=False)
        _band(ax, grok, lockin_key(w, "ratio23"), "grok", "C0", log=True)
        _band(ax, control, lockin_key(w, "ratio23"), "control", "C1", log=True)
        (g_fired, g_runs), (c_fired, c_runs) = _fire_epochs(grok, w), _fire_epochs(control, w)
        ax.set_title(f"W={w}: fired grok {len(g_fired)}/{g_runs}, control {len(c_fired)}/{c_runs}", fontsize=8)
        ax.set_xlabel("epoch")
        ax.legend(fontsize=7)
    np.atleast_1d(axes)[0].set_ylabel("sigma2 / sigma3")
    fig.suptitle(f"Window sweep [{profile}] {_describe(records)}; seeds {_seeds(records)}; "
                 f"{_horizon(records)} epochs", fontsize=8)
    return fig


def activation_figure(records: list[dict], window: int = 20, profile: str = "paper") -> Figure:
    """x^2 vs ReLU at eta > 0: test accuracy, sigma2/sigma3, sigma1/sigma2, rho_tian."""
    fig = Figure(figsize=(10, 6.5))
    axes = fig.subplots(2, 2, sharex=True).ravel()
    panels = (("test_acc", "test accuracy", False), (lockin_key(window, "ratio23"), "sigma2/sigma3", True),
              (lockin_key(window, "ratio12"), "sigma1/sigma2", True), ("rho_tian", "rho_tian", False))
    for ax, (key, label, log) in zip(axes, panels):
        for activation, color in (("x2", "C0"), ("relu", "C2")):
            _band(ax, _select(records, activation, grok=True), key, activation, color, log=log)
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    axes[3].axhline(RHO_THRESHOLD, color="gray", ls="--", lw=0.8)
    for ax in axes[2:]:
        ax.set_xlabel("epoch")
    fig.suptitle(f"x^2 vs ReLU [{profile}] {_describe(_select(records, grok=True))}; seeds {_seeds(records)}; "
                 f"{_horizon(records)} epochs", fontsize=8)
    return fig


def _first(record, key, threshold):
    return next((e for e, v in rows(record, key) if v is not None and v >= threshold), None)


def eta_sweep_figure(records: list[dict], window: int = 20, profile: str = "paper") -> Figure:
    """Per eta: test accuracy and sigma2/sigma3 curves, and rho fire vs test = 0.5 per run."""
    etas = sorted({_eta(r) for r in records if _eta(r) > 0})
    fig = Figure(figsize=(13, 3.8))
    ax_acc, ax_ratio, ax_scatter = fig.subplots(1, 3)
    cmap = matplotlib.colormaps["viridis"]
    for i, eta in enumerate(etas):
        runs, color = _select(records, eta=eta), cmap(i / max(1, len(etas) - 1))
        _band(ax_acc, runs, "test_acc", f"eta={eta:g}", color)
        _band(ax_ratio, runs, lockin_key(window, "ratio23"), f"eta={eta:g}", color, log=True)
        points = [(_first(r, "test_acc", 0.5), _first(r, "rho_tian", RHO_THRESHOLD)) for r in runs]
        points = [p for p in points if None not in p]
        if points:
            ax_scatter.scatter(*zip(*points), color=color, label=f"eta={eta:g}")
    ax_acc.set(xlabel="epoch", ylabel="test accuracy")
    ax_ratio.set(xlabel="epoch", ylabel="sigma2/sigma3")
    ax_scatter.set(xlabel="epoch test acc >= 0.5", ylabel=f"epoch rho >= {RHO_THRESHOLD}")
    for ax in (ax_acc, ax_ratio, ax_scatter):
        if ax.get_legend_handles_labels()[0]:  # no empty legend (and no warning) when nothing qualified
            ax.legend(fontsize=7)
    fig.suptitle(f"eta sweep [{profile}] x^2, {_describe(records)}; seeds {_seeds(records)}; "
                 f"{_horizon(records)} epochs", fontsize=8)
    return fig
