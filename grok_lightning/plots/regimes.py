"""The regime figures of arXiv 2605.20441: Fig. 5 (lambda_c, nu), Fig. 1 (lambda x N regime map),
Fig. 9 (multi-task heatmap) and Fig. 11 (AdamW norm relaxation and its bound).

Every function takes results (records, fit objects) and a caption, and returns a Figure; the
paper's values, when drawn, are passed in by the caller (they live next to the targets).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from grok_lightning.plots.common import PAPER_STYLE, finish, plt
from grok_lightning.stats.critical import CriticalFit, logistic_log10
from grok_lightning.stats.curves import PowerLawFit
from grok_lightning.stats.regimes import REGIMES
from grok_lightning.stats.relaxation import relaxation_curve

__all__ = ["figure_critical", "figure_regime_map", "figure_multitask", "figure_relaxation"]

#: this module's figure layout: the shared title/caption finish with a smaller caption
_layout = partial(finish, bottom=0.13, top=0.95, caption_size=6.5)

MARKERS = {"grok": ("o", "tab:green"), "no-grok": ("x", "tab:gray"), "collapse": ("s", "tab:red"),
           "diverged": ("^", "black")}


def _wd_grid(wd: np.ndarray) -> np.ndarray:
    return np.logspace(np.log10(wd.min()) - 0.3, np.log10(wd.max()) + 0.3, 200)


def figure_critical(paper_fit: CriticalFit, glm_fit: CriticalFit, wd_grok: np.ndarray, t_grok: np.ndarray,
                    nu_fit: PowerLawFit | None, paper_values: dict, caption_text: str,
                    paper_sample: list[tuple[float, float]] = ()):
    """Fig. 5: (A) P(grok) vs lambda with Wilson bars, both logistic fits and lambda_c with its CI;
    (B) t_grok vs lambda - lambda_c (log-log) with the power law and the 1/2, 0.63 references, or,
    without a power law, t_grok vs lambda beside the paper's published ``(lambda, t_grok)`` sample.

    ``paper_values``: ``{"wd_c": .., "wd_c_ci": [..], "nu": .., "nu_ci": [..]}`` drawn dotted.
    """
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.6))
    bins = paper_fit.bins
    wd = np.array([b["wd"] for b in bins])
    p = np.array([b["p_grok"] for b in bins])
    err = np.array([[b["p_grok"] - b["wilson_lo"] for b in bins], [b["wilson_hi"] - b["p_grok"] for b in bins]])
    ax_a.errorbar(wd, p, yerr=err, fmt="o", color="black", capsize=3, label="bin fraction, Wilson 95%")
    level, previous = 0, None
    for b in sorted(bins, key=lambda b: b["wd"]):
        # a bin within a fifth of a decade of the one before at the same height: its label one line up
        close = previous is not None and np.log10(b["wd"] / previous["wd"]) < 0.2 and b["p_grok"] == previous["p_grok"]
        level = 1 - level if close else 0
        ax_a.annotate(f"{b['n_grok']}/{b['n']}", (b["wd"], b["p_grok"]), textcoords="offset points",
                      xytext=(4, 4 + 8 * level), fontsize=6)
        previous = b
    grid = _wd_grid(wd)
    # both fits are ours, on our runs: the paper's method (least squares, as its code) and a binomial GLM
    for fit, color, name in ((paper_fit, "tab:blue", "ours, paper's method (least squares)"),
                             (glm_fit, "tab:orange", "ours, binomial GLM")):
        if not np.isfinite(fit.wd_c):
            ax_a.plot([], [], color=color, label=f"{name}: {fit.status}, no estimate")
            continue
        lo, hi = fit.wd_c_ci
        ci = f" [{lo:.3g}, {hi:.3g}]" if np.all(np.isfinite(fit.wd_c_ci)) else " (no CI)"
        ax_a.plot(grid, logistic_log10(np.log10(grid), np.log10(fit.wd_c), fit.k), color=color,
                  label=f"{name}: $\\lambda_c$ = {fit.wd_c:.3g}{ci}")
        band_ = fit.curve_band(grid)
        if band_ is not None:
            ax_a.fill_between(grid, *band_, color=color, alpha=0.15, linewidth=0)
        ax_a.axvline(fit.wd_c, color=color, linestyle="--", linewidth=1)
        if np.all(np.isfinite(fit.wd_c_ci)):
            ax_a.axvspan(lo, hi, color=color, alpha=0.08)
    ax_a.axvline(paper_values["wd_c"], **PAPER_STYLE, label=f"paper $\\lambda_c$ = {paper_values['wd_c']} "
                 f"[{paper_values['wd_c_ci'][0]}, {paper_values['wd_c_ci'][1]}]")
    ax_a.set_xscale("log")
    # the bins (and the paper's interval) set the range: a lambda_c interval reaching decades below
    # the lowest bin (few seeds per bin) would squeeze every bin into a corner; its bounds are in the legend
    ax_a.set_xlim(min(grid[0], paper_values["wd_c_ci"][0] / 1.5), grid[-1])
    ax_a.set_ylim(-0.05, 1.17)  # room for the labels of the bins at 1, one line up where neighbours crowd
    ax_a.set_xlabel(r"weight decay $\lambda$ (log)")
    ax_a.set_ylabel("P(grok)")
    ax_a.set_title(f"(A) grokking probability (N = {paper_fit.n_fit} runs)", fontsize=9)
    # below the axes: inside, it would hide a bin's count (a bin at high lambda that did not grok)
    ax_a.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)

    if nu_fit is None:
        grokked = np.isfinite(t_grok)
        if grokked.any():
            ax_b.loglog(wd_grok[grokked], t_grok[grokked], "o", color="tab:green", alpha=0.7,
                        label=f"ours: grokked runs (n = {int(grokked.sum())})")
        if len(paper_sample):
            wd_p, t_p = np.asarray(paper_sample, dtype=float).T
            ax_b.loglog(wd_p, t_p, "x", color="black", label=f"paper's published sample (n = {len(t_p)})")
        ax_b.set_xlabel(r"weight decay $\lambda$ (log)")
        ax_b.set_title("(B) time to grok vs $\\lambda$ (power law not fitted: it needs $\\lambda_c$ and\n"
                       ">= 3 grokked runs at >= 2 lambdas above it)", fontsize=9)
    else:
        keep = np.isfinite(t_grok) & (wd_grok > nu_fit.wd_c)
        x = wd_grok[keep] - nu_fit.wd_c
        ax_b.loglog(x, t_grok[keep], "o", color="tab:green", alpha=0.7, label=f"grokked runs (n = {nu_fit.n_points})")
        xs = np.logspace(np.log10(x.min()) - 0.1, np.log10(x.max()) + 0.1, 50)
        nlo, nhi = nu_fit.nu_ci
        ax_b.loglog(xs, nu_fit.A * xs ** (-nu_fit.nu), color="tab:blue",
                    label=f"fit: $\\nu$ = {nu_fit.nu:.3f} [{nlo:.3f}, {nhi:.3f}]")
        x0, y0 = np.exp(np.mean(np.log(x))), np.exp(np.mean(np.log(t_grok[keep])))
        excluded = paper_values.get("excluded", (0.5, 0.63))
        for exponent, style in zip(excluded, (":", "-.")):
            ax_b.loglog(xs, y0 * (xs / x0) ** (-exponent), color="grey", linestyle=style, linewidth=1,
                        label=f"reference exponent {exponent:g}")
        held = [f"{e:g}" for e in excluded if nlo <= e <= nhi]
        verdicts = "; ".join(f"{e:g}: {'inside' if f'{e:g}' in held else 'outside'}" for e in excluded)
        ax_b.text(0.02, 0.02, f"the paper's $\\nu$ interval [{paper_values['nu_ci'][0]}, {paper_values['nu_ci'][1]}] "
                  f"excludes {' and '.join(f'{e:g}' for e in excluded)}\nours [{nlo:.3f}, {nhi:.3f}]: {verdicts}",
                  transform=ax_b.transAxes, fontsize=7, va="bottom", ha="left",
                  bbox=dict(facecolor="white", alpha=0.8, linewidth=0.5))
        # the paper's slope through the same anchor: its A belongs to its own lambda_c, not ours
        ax_b.loglog(xs, y0 * (xs / x0) ** (-paper_values["nu"]), **PAPER_STYLE,
                    label=f"paper slope $\\nu$ = {paper_values['nu']} [{paper_values['nu_ci'][0]}, {paper_values['nu_ci'][1]}]")
        ax_b.set_xlabel(rf"$\lambda - \lambda_c$ (log; $\lambda_c$ = {nu_fit.wd_c:.3g})")
        ax_b.set_title(r"(B) time to grok vs distance from $\lambda_c$", fontsize=9)
    ax_b.set_ylabel(r"$t_{grok}$ (epochs, log)")
    if ax_b.get_legend_handles_labels()[0]:
        ax_b.legend(fontsize=6.5)
    return _layout(fig, "Fig. 5: critical weight decay and the time-to-grok power law", caption_text)


def figure_regime_map(points: list[dict], wd_c: float | None, caption_text: str, paper_wd_c: float):
    """Fig. 1: one marker per run at (lambda, model size N), by regime; regimes shaded.

    ``points``: ``{"wd", "n_params", "regime"}`` per run (:func:`~grok_lightning.stats.classify_run`).
    Shading: memorisation left of lambda_c, grokking between lambda_c and the smallest lambda
    with a collapsed run, collapse from there on.
    """
    fig, ax = plt.subplots(figsize=(9.5, 4.6))
    sizes = sorted({pt["n_params"] for pt in points})
    level = {n: i for i, n in enumerate(sizes)}
    rng = np.random.default_rng(0)  # jitter so that seeds at one (lambda, N) do not hide each other
    for regime in REGIMES:
        chosen = [pt for pt in points if pt["regime"] == regime]
        if not chosen:
            continue
        marker, color = MARKERS[regime]
        x = np.array([pt["wd"] for pt in chosen]) * 10 ** rng.uniform(-0.04, 0.04, len(chosen))
        y = np.array([level[pt["n_params"]] for pt in chosen]) + rng.uniform(-0.18, 0.18, len(chosen))
        ax.scatter(x, y, marker=marker, color=color, s=28, label=f"{regime} ({len(chosen)})")
    wds = np.array([pt["wd"] for pt in points])
    lo, hi = wds.min() / 2, wds.max() * 2
    collapsed = [pt["wd"] for pt in points if pt["regime"] == "collapse"]
    edge = min(collapsed) if collapsed else None
    if wd_c is not None and np.isfinite(wd_c):
        ax.axvspan(lo, wd_c, color="tab:gray", alpha=0.10)
        ax.axvspan(wd_c, edge or hi, color="tab:green", alpha=0.08)
        ax.axvline(wd_c, color="tab:blue", linestyle="--", label=f"our $\\lambda_c$ = {wd_c:.3g}")
        ax.text(np.sqrt(lo * wd_c), len(sizes) - 0.45, "memorisation", ha="center", fontsize=8)
    if edge:
        ax.axvspan(edge, hi, color="tab:red", alpha=0.08)
        ax.text(np.sqrt(edge * hi), len(sizes) - 0.45, "collapse", ha="center", fontsize=8)
    off = "" if lo <= paper_wd_c <= hi else " (left of this grid)"
    ax.axvline(paper_wd_c, **PAPER_STYLE, label=f"paper $\\lambda_c$ = {paper_wd_c}{off}")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_yticks(range(len(sizes)), [f"{n / 1e6:.3g}M" if n >= 1e5 else f"{n / 1e3:.3g}k" for n in sizes])
    ax.set_ylim(-0.6, len(sizes) - 0.2)
    ax.set_xlabel(r"weight decay $\lambda$ (log)")
    ax.set_ylabel("model size N (parameters)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never hides a run
    return _layout(fig, "Fig. 1: weight-decay regimes over lambda and model size", caption_text, bottom=0.12)


def figure_multitask(counts: dict, totals: dict, wds: list[float], rows: list[str], caption_text: str,
                     paper: dict | None = None):
    """Fig. 9: grok counts per (task, scale) row and lambda column, ours beside the paper's.

    ``counts[row][wd]`` grokked runs out of ``totals[row][wd]``. ``paper``:
    ``{"rows": [...], "wds": [...], "counts": {row: [count per wd]}, "out_of": 5}``, drawn as its
    own panel (the paper's rows and lambda grid need not match ours in a smoke run).
    """
    panels = [("ours", rows, wds, lambda r, w: (counts[r].get(w, 0), totals[r].get(w, 0)))]
    if paper:
        index = {w: j for j, w in enumerate(paper["wds"])}
        panels.append((f"paper (out of {paper['out_of']})", paper["rows"], paper["wds"],
                       lambda r, w: (paper["counts"][r][index[w]], paper["out_of"])))
    height = 0.45 * max(len(p[1]) for p in panels) + 2.4
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), height), squeeze=False)
    for ax, (name, shown, columns, cell) in zip(axes[0], panels):
        frac = np.full((len(shown), len(columns)), np.nan)
        for i, r in enumerate(shown):
            for j, w in enumerate(columns):
                k, n = cell(r, w)
                if n:
                    frac[i, j] = k / n
                ax.text(j, i, f"{k}/{n}" if n else "-", ha="center", va="center", fontsize=7,
                        color="white" if n and k / n > 0.6 else "black")
        ax.imshow(frac, cmap="Greens", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(columns)), [f"{w:g}" for w in columns], fontsize=7)
        ax.set_yticks(range(len(shown)), shown, fontsize=7)
        ax.set_xlabel(r"weight decay $\lambda$")
        ax.set_title(name, fontsize=9)
    return _layout(fig, "Fig. 9: grokking counts per task, scale and weight decay", caption_text, bottom=0.2)


def figure_relaxation(t: np.ndarray, omega: np.ndarray, fits: list[tuple], bound_sets: list[tuple],
                      empirical: dict, paper_values: dict, caption_text: str):
    """Fig. 11: (A) Omega_total(t) with one or more exponential-relaxation fits and their kappa; (B)
    the AdamW bound lambda_c(p_relax) of each kappa against the empirical lambda_c and its CI
    (Table 4 as a plot).

    ``fits``: ``[(label, RelaxationFit or None, kappa), ...]``; ``bound_sets``: ``[(label,
    adamw_bound_table rows), ...]``; ``empirical``: ``{"wd_c": .., "wd_c_ci": [..]}`` (ours, same
    horizon); ``paper_values``: ``{"kappa": .., "bound_099": ..}``.
    """
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.4))
    ax_a.plot(t, omega, "o", markersize=3, color="black", label=r"$\Omega_{total}$ (L2 norm of all weights)")
    colors = ("tab:blue", "tab:orange", "tab:purple")
    ts = np.linspace(0.0, t.max(), 300)
    for (label, fit, kappa), color in zip(fits, colors):
        if fit is not None and fit.converged:
            ax_a.plot(ts, relaxation_curve(ts, fit.omega_inf, fit.omega_0, fit.rate), color=color,
                      label=f"{label}: $\\Omega_0$ = {fit.omega_0:.3g}, $\\Omega_\\infty$ = {fit.omega_inf:.3g}, "
                            f"$\\kappa$ = {kappa:.3g} (R$^2$ = {fit.r2:.3f})")
    # the paper reports kappa as a number, not its fitted curve: a note, not a legend line without a curve
    ax_a.text(0.98, 0.6, f"paper: $\\kappa$ = {paper_values['kappa']} (canonical, 20,000 epochs,\n"
                          r"$\Omega_0$ at its cap of 200)", transform=ax_a.transAxes, ha="right", va="center", fontsize=7)
    ax_a.set_xlabel("epoch")
    ax_a.set_ylabel(r"$\Omega_{total}$")
    ax_a.set_title("(A) weight-norm relaxation", fontsize=9)
    ax_a.legend(fontsize=6)

    for (label, rows), color in zip(bound_sets, colors):
        if rows:
            p = np.array([r["p_relax"] for r in rows])
            ax_b.plot(p, [r["wd_c_bound"] for r in rows], "o-", color=color,
                      label=f"AdamW bound $-\\ln(1-p)/(\\eta\\kappa T_{{max}})$, {label} $\\kappa$")
    if empirical.get("wd_c") is not None and np.isfinite(empirical["wd_c"]):
        ax_b.axhline(empirical["wd_c"], color="tab:green", label=f"our empirical $\\lambda_c$ = {empirical['wd_c']:.3g}")
        ci = empirical.get("wd_c_ci")
        if ci and all(v is not None and np.isfinite(v) for v in ci):
            ax_b.axhspan(ci[0], ci[1], color="tab:green", alpha=0.15, label="its bootstrap 95% CI")
    ax_b.plot([0.99], [paper_values["bound_099"]], "*", color="black", markersize=9,
              label=f"paper bound at p = 0.99: {paper_values['bound_099']} (T_max 20,000)")
    ax_b.set_yscale("log")
    ax_b.set_xlabel(r"$p_{relax}$")
    ax_b.set_ylabel(r"$\lambda_c$")
    ax_b.set_title("(B) horizon bound vs empirical critical weight decay", fontsize=9)
    ax_b.legend(fontsize=6)
    return _layout(fig, "Fig. 11: AdamW norm relaxation and the horizon bound on lambda_c", caption_text)
