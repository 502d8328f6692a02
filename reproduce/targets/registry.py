"""Every reproduction target, in one table: what it runs, what it draws, what its smoke run shows.

A :class:`Target` is one module ``reproduce/targets/<name>.py`` with ``main(argv)`` that writes
``<out>/<name>/`` (figures, ``summary.json``, ``rows.json``). Its :class:`Figure` entries are the
parts ``make`` and ``python -m reproduce`` can run alone (``make reproduce-fig3`` runs
``long_horizon`` with ``--only fig3``). From this table come the Makefile's ``reproduce-*`` rules
(:mod:`reproduce.targets.make`), the order of ``make reproduce-all`` (:mod:`reproduce.targets.all`),
the targets the medium report says it left out (:func:`reproduce.targets.costs.medium_left_out`),
and the smoke line of every caption (:func:`reproduce.targets.common.caption`). It imports nothing,
so that any module of ``reproduce`` can read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["MEDIUM_LEFT_OUT", "MEDIUM_ORDER", "PROFILES", "TARGETS", "Figure", "MediumAbsence", "SmokeScope", "Sweep", "Target",
           "find", "order", "smoke_scope", "target"]

PROFILES = ("smoke", "medium", "paper")
#: a target's or figure's name: a make target ``reproduce-<name>`` and a word of ``python -m reproduce``
NAME = re.compile(r"[a-z][a-z0-9_-]*")
#: words of ``python -m reproduce`` that are not targets
RESERVED = ("all", "list", "makefile")


class SmokeScope(NamedTuple):
    """The last line of a smoke caption: what a smoke run can show, and what needs a longer
    profile, so a reader never takes a pipeline check for a null result."""

    shows: str
    needs: str


@dataclass(frozen=True)
class Sweep:
    """A sweep file under configs/sweeps/ a target runs or reads, and the target's profiles that use it."""

    file: str
    profiles: tuple[str, ...] = PROFILES

    def __post_init__(self):
        if not self.file.endswith(".yaml") or "/" in self.file:
            raise ValueError(f"Sweep.file={self.file!r}: a file name under configs/sweeps/")
        _check_profiles(f"Sweep({self.file}).profiles", self.profiles)


@dataclass(frozen=True)
class Figure:
    """One figure of a target, run alone: ``main(["--only", part, ...])`` of the target's module."""

    name: str
    part: str
    help: str
    plots: tuple[str, ...]
    smoke: SmokeScope | None = None

    def __post_init__(self):
        _check_entry(self)


@dataclass(frozen=True)
class MediumAbsence:
    """Why the medium pass of ``make reproduce-all`` leaves a target out: ``reason``, then, for a
    target whose paper protocol is GPU-sized, the measured CPU cost of ``systems`` (``{system:
    label}`` of results/pilots/costs, :func:`reproduce.targets.costs.compute_needed`) or
    ``unmeasured`` before it is measured, then ``then``."""

    reason: str = ""
    systems: tuple[tuple[str, str], ...] = ()
    unmeasured: str = ""
    then: str = ""


@dataclass(frozen=True)
class Target:
    """One reproduction target: ``reproduce/targets/<name>.py``, writing ``<out>/<name>/``.

    ``help`` is its line in ``make help`` (the profiles are added to it); ``plots`` the functions
    of ``grok_lightning.plots`` it draws with; ``smoke`` its captions' smoke line (``None`` where
    each figure has its own); ``make``: whether ``make reproduce-<name>`` runs it whole; ``extra``:
    the package extra that make installs first; ``medium``: why the medium pass leaves it out
    (``None``: it is in :data:`MEDIUM_ORDER`)."""

    name: str
    help: str
    sweeps: tuple[Sweep, ...]
    plots: tuple[str, ...]
    smoke: SmokeScope | None
    profiles: tuple[str, ...] = PROFILES
    figures: tuple[Figure, ...] = ()
    make: bool = True
    extra: str | None = None
    medium: MediumAbsence | None = None

    def __post_init__(self):
        _check_entry(self)
        _check_profiles(f"Target({self.name}).profiles", self.profiles)
        for sweep in self.sweeps:
            if not set(sweep.profiles) <= set(self.profiles):
                raise ValueError(f"Target({self.name}): {sweep.file} under profiles {sweep.profiles}, "
                                 f"the target has {self.profiles}")
        if not self.make and not self.figures:
            raise ValueError(f"Target({self.name}): make=False and no figures: make cannot run it")

    @property
    def module(self) -> str:
        return f"reproduce.targets.{self.name}"


def _check_profiles(field: str, profiles: tuple[str, ...]) -> None:
    if not profiles or not set(profiles) <= set(PROFILES):
        raise ValueError(f"{field}={profiles!r}: a non-empty subset of {PROFILES}")


def _check_entry(entry: Target | Figure) -> None:
    kind = type(entry).__name__
    if not NAME.fullmatch(entry.name) or entry.name in RESERVED:
        raise ValueError(f"{kind}.name={entry.name!r}: lower case, digits, '-' or '_', not one of {RESERVED}")
    if not entry.help.strip() or "PROFILE=" in entry.help or "\n" in entry.help:
        raise ValueError(f"{kind}({entry.name}).help: one line, without the profiles (they are added)")


TARGETS: tuple[Target, ...] = (
    Target("canonical", "the canonical run (p=97, 4Lx8H, lambda=1) until it groks; every profile runs the same run",
           sweeps=(), plots=(),
           smoke=SmokeScope("grokking of the canonical model at lambda 1", "Phase 2 (medium Fig. 2: 2,000 epochs)"),
           medium=MediumAbsence("the single canonical run is part of Fig. 2's medium runs")),
    Target("fig5", "Fig. 5 lambda_c (logistic, bootstrap, GLM) and nu",
           sweeps=(Sweep("canonical_wd.yaml"),), plots=("regimes.figure_critical",),
           smoke=SmokeScope("the grok-probability sigmoid and its fits at a short horizon",
                            "lambda_c of the canonical model at the paper's 5,000-epoch horizon (medium)")),
    Target("fig1", "Fig. 1 regime map lambda x model size, on Fig. 5's sweep and more",
           sweeps=(Sweep("canonical_wd.yaml"), Sweep("regime_map.yaml")), plots=("regimes.figure_regime_map",),
           smoke=SmokeScope("the regime map's plumbing on the 2 smallest models",
                            "the 19M and 85M models (paper profile, GPU)")),
    Target("predict", '"does it predict?": held-out AUC of baselines vs attention diagnostics, on the runs of '
                      "Fig. 5 and 1 (medium: 5, 4 and 8)",
           sweeps=(Sweep("canonical_wd.yaml"), Sweep("regime_map.yaml", ("smoke", "paper")),
                   Sweep("head_width.yaml", ("medium",)), Sweep("e12.yaml", ("medium",))),
           plots=("predict.figure_auc", "predict.figure_holdout"),
           smoke=SmokeScope("the predictor's pipeline (underpowered)", "~15 seeds per lambda inside the transition (paper)")),
    Target("fig11", "Fig. 11 / Table 4 AdamW relaxation kappa and horizon bound",
           sweeps=(Sweep("long_horizon.yaml"), Sweep("canonical_wd.yaml")), plots=("regimes.figure_relaxation",),
           smoke=SmokeScope("kappa from lambda = 1 smoke runs",
                            "kappa with the paper's estimator on 1,000-epoch runs (medium)")),
    Target("fig9", "Fig. 9 multi-task grok counts, per-task lambda_c",
           sweeps=(Sweep("multitask.yaml"), Sweep("canonical_wd.yaml", ("smoke",))), plots=("regimes.figure_multitask",),
           smoke=SmokeScope("per-task grok counts at a short horizon",
                            "per-task lambda_c (medium profile: make reproduce-fig9 PROFILE=medium)"),
           medium=MediumAbsence(systems=(("fig9_small", "0.82M"), ("fig9_medium", "19M")),
                                unmeasured="E9 at 10,000 epochs: GPU-sized",
                                then=" (a smoke-sized medium profile exists: make reproduce-fig9 PROFILE=medium)")),
    Target("fig2", "Fig. 2 two-phase dynamics",
           sweeps=(Sweep("fig2.yaml"),), plots=("figures.figure_two_phase",),
           smoke=SmokeScope("memorisation, grokking and the Phase-1 rise of s_bar",
                            "Phase 2, the sigma_H peak and the s_bar dip after grokking (medium: 3 seeds x 2,000 epochs)")),
    Target("fig8", "Fig. 8 E12 interventions: control, head re-init, norm clip, paired tests",
           # groups B and C are derived from the control's sweep with configs/interventions/*.yaml
           sweeps=(Sweep("interventions.yaml", ("smoke",)), Sweep("e12.yaml", ("medium", "paper")),
                   Sweep("canonical_wd.yaml")),
           plots=("e12.figure_controls", "interventions.figure_forest"),
           smoke=SmokeScope("A, B and C on 2 paired seeds (no test can pass)",
                            "the paired tests of E12 (medium: 6 seeds, 300-epoch window)")),
    Target("fig4", "Fig. 4 peak sigma_H vs d/H and the random-label null",
           # a7_contrasts.yaml: read for the a7 rows only (trained by the a7_* campaigns)
           sweeps=(Sweep("head_width.yaml"), Sweep("a7_contrasts.yaml", ("medium",))),
           plots=("interventions.figure_head_width", "interventions.figure_head_width_curves"),
           smoke=SmokeScope("the amplitude fit and null on 6 runs",
                            "the slope's sign and size (medium: H 4/8/16 + null, 4 seeds, 600 epochs)")),
    Target("fig10", "Fig. 10 lambda_c per architecture: MLP, LSTM, Mamba",
           sweeps=(Sweep("cross_arch.yaml"), Sweep("canonical_wd.yaml", ("smoke",)), Sweep("multitask.yaml", ("paper",))),
           plots=("architectures.figure_architectures",),
           smoke=SmokeScope("every architecture's pipeline at 200 epochs",
                            "the 10,000-epoch comparison (paper profile, GPU)")),
    # one sweep shared by three figures, analysed post hoc; Fig. 6 also writes Table 3 (C1 identity);
    # the E8 retention table is the part `e8`, run by reproduce-all (every part) or --only e8
    Target("long_horizon", "Fig. 3, 6, 7 and the E8 retention table from one long-horizon sweep",
           sweeps=(Sweep("long_horizon.yaml"),), plots=(), smoke=None, make=False, figures=(
               Figure("fig3", "fig3", "Fig. 3 five-stage long-horizon trajectory", ("long_horizon.figure_five_stage",),
                      SmokeScope("the five-stage panels' pipeline on 300-epoch runs",
                                 "the later stages (medium: 1,000 epochs; paper: 20,000)")),
               Figure("fig6", "fig6", "Fig. 6 PR_norm over checkpoints + Table 3 C1 identity",
                      ("long_horizon.figure_pr_norm",),
                      SmokeScope("PR_norm at the smoke checkpoints", "Table 3's rows at epochs 100/500/1,000 (medium)")),
               Figure("fig7", "fig7", "Fig. 7 ESD alpha over checkpoints", ("long_horizon.figure_esd_alpha",),
                      SmokeScope("the ESD alpha pipeline", "alpha at epochs 100/500/1,000 (medium)")))),
    # the lock-in parts share one smoke line (lockin_common.caption_text); `mp` has no figure of its own
    Target("lockin", "spectral lock-in (arXiv 2605.08119): main, window, x^2 vs ReLU, eta sweep",
           sweeps=(Sweep("lockin_main.yaml"), Sweep("lockin_relu.yaml"), Sweep("lockin_eta.yaml"),
                   Sweep("lockin_eta_long.yaml", ("medium", "paper")), Sweep("lockin_mp.yaml", ("medium", "paper"))),
           plots=(), smoke=SmokeScope("the detector and sign rule on shortened runs",
                                      "the paper's own protocol (medium: 15 + 15 seeds)"), figures=(
               Figure("lockin-fig1", "main", "lock-in Fig. 1: sigma2/sigma3, grok vs control, and the sign rule",
                      ("lockin.main_figure",)),
               Figure("lockin-fig2", "window", "lock-in Fig. 2: the detector's window W = 5/10/20/30",
                      ("lockin.window_sweep_figure",)),
               Figure("lockin-fig3", "activation", "lock-in Fig. 3: x^2 vs ReLU", ("lockin.activation_figure",)),
               Figure("lockin-fig4", "eta", "lock-in Fig. 4: the eta sweep", ("lockin.eta_sweep_figure",)))),
    # counted post hoc from each run's saved weights, as Fig. 6/7 are
    Target("head_clusters", "head-role clusters (section 5): single linkage of the heads' output vectors at cosine "
                            "distance 0.5, per checkpoint",
           sweeps=(Sweep("head_clusters.yaml"),), plots=("heads.figure_head_clusters",),
           smoke=SmokeScope("the clustering pipeline on the smoke model's 8 heads, 0-60 epochs",
                            "the count at epoch 160 on the canonical model's 32 heads (medium: 3 seeds x 200 epochs)")),
    # reads the long_horizon runs' checkpoints (medium: the 20,000-epoch lambda-1 runs) and trains
    # nothing; its measurements ship beside the runs' records, so without devinterp (an install
    # without the `llc` extra) it reads them, and writes "not run" rLLC rows only where none are stored
    Target("rllc", "rLLC vs sigma_H over the long-horizon checkpoints (devinterp SGLD, the `llc` extra)",
           sweeps=(Sweep("long_horizon.yaml"),), plots=("predict.figure_rllc",),
           smoke=SmokeScope("the SGLD estimate on the smoke checkpoints", "a correlation over many checkpoints (paper)"),
           extra="llc"),
)

#: the medium pass of reproduce-all, in the order it runs: fig2 first in priority, but its long runs
#: go last so that its third seed shares the cores with the other targets; rllc after the
#: long_horizon runs it reads, head_clusters (three 200-epoch runs) beside that post-hoc weight
#: analysis; fig11 reads the long_horizon and fig5 runs; fig1 adds lambda 10 and 3 to fig5's runs and fig10 trains the MLP,
#: both after E12 (fig8); predict trains nothing and reads the fig5, fig4 and fig8 records, so it
#: comes last. (Smoke and paper run :data:`TARGETS` in their order: predict reads the Fig. 5 and
#: Fig. 1 sweeps, rllc the long_horizon checkpoints.)
MEDIUM_ORDER = ("fig8", "long_horizon", "rllc", "head_clusters", "fig5", "fig11", "lockin", "fig4", "fig2", "fig1", "fig10",
                "predict")
#: the targets with a :class:`MediumAbsence`, in the order the medium report and docs/medium.md list them
MEDIUM_LEFT_OUT = ("canonical", "fig9")


def target(name: str) -> Target:
    """The target called ``name``."""
    for entry in TARGETS:
        if entry.name == name:
            return entry
    raise KeyError(f"{name!r} is not a target: {', '.join(t.name for t in TARGETS)}")


def find(name: str) -> tuple[Target, Figure | None]:
    """``(target, None)`` for a target's name, ``(target, figure)`` for one of its figures.

    >>> [(t.name, f and f.part) for t, f in (find("fig5"), find("fig3"))]
    [('fig5', None), ('long_horizon', 'fig3')]
    """
    for entry in TARGETS:
        if entry.name == name:
            return entry, None
        for figure in entry.figures:
            if figure.name == name:
                return entry, figure
    names = [n for t in TARGETS for n in (t.name, *(f.name for f in t.figures))]
    raise KeyError(f"{name!r} is neither a target nor a figure: {', '.join(names)}")


def smoke_scope(name: str) -> SmokeScope:
    """The smoke line of a target or figure; a figure without its own has its target's."""
    entry, figure = find(name)
    scope = (figure.smoke if figure is not None else None) or entry.smoke
    if scope is None:
        raise KeyError(f"{name!r} has no smoke scope: each of its figures has one")
    return scope


def order(profile: str) -> tuple[str, ...]:
    """The targets ``make reproduce-all`` runs under ``profile``, in order."""
    if profile == "medium":
        return MEDIUM_ORDER
    return tuple(t.name for t in TARGETS if profile in t.profiles)


def _check_table() -> None:
    names = [n for t in TARGETS for n in (t.name, *(f.name for f in t.figures))]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"registry: names used twice: {doubled}")
    medium = {t.name for t in TARGETS if t.medium is None}
    if any("medium" not in target(name).profiles for name in medium):
        raise ValueError("registry: a target in the medium pass without the medium profile")
    if medium != set(MEDIUM_ORDER) or len(MEDIUM_ORDER) != len(medium):
        raise ValueError(f"registry: MEDIUM_ORDER {MEDIUM_ORDER} must list once each target without a MediumAbsence "
                         f"({sorted(medium)})")
    absent = {t.name for t in TARGETS} - medium
    if absent != set(MEDIUM_LEFT_OUT) or len(MEDIUM_LEFT_OUT) != len(absent):
        raise ValueError(f"registry: MEDIUM_LEFT_OUT {MEDIUM_LEFT_OUT} must list once each target with a MediumAbsence "
                         f"({sorted(absent)})")


_check_table()
