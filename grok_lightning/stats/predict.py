"""Does it predict? Held-out AUC of baseline features vs. the attention diagnostics.

The paper (arXiv 2605.20441, section 4.8, E11) trains a random forest and a logistic regression on
features taken at a fixed early epoch and reports a holdout AUC of 0.799 (RF) for retention, with
grouped cross-validation by (scale, weight decay). The author's repository later added that
held-out analyses found **no predictive value of the attention readouts beyond training-clock,
loss and weight-norm baselines**. This module measures exactly that contrast on our records:

* :func:`feature_table`: one row per run from the history row at or just before epoch ``E``
  (nothing after ``E`` is read, except for the targets);
* :func:`grouped_oof_predictions`: out-of-fold probabilities with whole (scale, lambda) groups
  held out (``LeaveOneGroupOut`` by default, ``GroupKFold`` when ``n_splits`` is given);
* :func:`auc_study`: AUC (and Brier score) of the pooled out-of-fold predictions for each
  feature set and model, a cluster bootstrap over groups for the CIs, and the paired difference
  ``baseline+diagnostics - baseline`` computed on the same resamples.

Feature sets (column names of the table)::

    baseline     epoch, epochs_since_fit, train_loss, train_acc, weight_norm, log10_wd, log10_params
    diagnostics  s_bar, sigma_H, s_bar_slope, sigma_H_slope
    test         test_loss, test_acc   (only in the optional set "baseline+test")

Test loss and accuracy are **not** in the baseline: the grokking target is defined by test
accuracy (>= 0.99), so near the grok epoch they are the label in disguise. The paper's feature
list does contain test accuracy; ``"baseline+test"`` shows what it adds. (The diagnostics are
computed on test-split attention too, but they never see the labels.)

Targets:

* ``"grokked"``: the run's record has a grok epoch (grokked within its horizon) and did not diverge,
  as in :func:`~grok_lightning.stats.records_to_arrays`. Runs that had already grokked at ``E`` are
  dropped (their outcome is known at prediction time).
* ``"retained"``: the paper's E11 label over *all* runs: grokked and still generalising at the end
  (tag ``retained`` of :mod:`grok_lightning.stats.retention`); never grokked, anti-grokked and
  collapsed count as 0. The record's ``retention`` tag is used when present; otherwise the rule is
  replayed on the history with its default thresholds (``retention_source = "history"``). A run that
  grokked but was stopped early (``grok.extra_epochs``) has no observable retention and is dropped.

Everything degenerate (one class, fewer than two groups, a bootstrap with too few two-class
resamples) returns the string ``"undefined: <reason>"`` instead of a number.

Needs scikit-learn (the optional extra ``predict``: ``pip install -e .[predict]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from grok_lightning.stats.retention import retention_of

__all__ = [
    "BASELINE_FEATURES", "DIAGNOSTIC_FEATURES", "TEST_FEATURES", "FEATURE_SETS", "MODELS",
    "FeatureRow", "feature_row", "feature_table", "retention_label", "grouped_oof_predictions",
    "auc_study", "undefined", "is_undefined", "make_classifier", "mann_whitney_auc",
]

BASELINE_FEATURES = ("epoch", "epochs_since_fit", "train_loss", "train_acc", "weight_norm", "log10_wd",
                     "log10_params")
DIAGNOSTIC_FEATURES = ("s_bar", "sigma_H", "s_bar_slope", "sigma_H_slope")
TEST_FEATURES = ("test_loss", "test_acc")
FEATURE_SETS = {
    "baseline": BASELINE_FEATURES,
    "diagnostics": DIAGNOSTIC_FEATURES,
    "baseline+diagnostics": BASELINE_FEATURES + DIAGNOSTIC_FEATURES,
}
#: the optional set with the test-split metrics (label-adjacent, see the module docstring)
BASELINE_PLUS_TEST = {"baseline+test": BASELINE_FEATURES + TEST_FEATURES}
MODELS = ("random_forest", "logistic")
#: record history column -> feature name
_HISTORY = {"train_loss": "train_loss", "train_acc": "train_acc", "test_loss": "test_loss",
            "test_acc": "test_acc", "weight_norm": "weight_norm", "mean_similarity": "s_bar",
            "entropy_std": "sigma_H"}


def undefined(reason: str) -> str:
    """The value of a statistic that cannot be computed honestly.

    >>> undefined("one class")
    'undefined: one class'
    """
    return f"undefined: {reason}"


def is_undefined(value) -> bool:
    return isinstance(value, str) and value.startswith("undefined")


# --- features -----------------------------------------------------------------------------
@dataclass
class FeatureRow:
    run_id: str | None
    group: str
    features: dict
    grokked: bool
    grok_epoch: int | None
    retained: int | None  # None: retention not observable for this run
    retention_source: str
    excluded: str | None = None  # why the run is left out of the grok target (None: kept)
    meta: dict = field(default_factory=dict)


def _slope(epochs: np.ndarray, values: np.ndarray) -> float:
    ok = np.isfinite(values)
    if ok.sum() < 2 or np.ptp(epochs[ok]) == 0:
        return float("nan")
    return float(np.polyfit(epochs[ok], values[ok], 1)[0])


def _n_params(record: dict) -> float:
    if record.get("n_params"):
        return float(record["n_params"])
    return float("nan")  # imputed later; the group key still carries the shape


def _scale_key(record: dict) -> str:
    if record.get("n_params"):
        return f"{int(record['n_params'])}"
    m = record.get("config", {}).get("model", {})
    return f"{m.get('arch')}-{m.get('n_layers')}x{m.get('n_heads')}x{m.get('d_model')}x{m.get('d_ff')}"


def retention_label(record: dict) -> tuple[int | None, str]:
    """``(1 retained / 0 not / None unobservable, source)`` with the paper's E11 label.

    >>> retention_label({"retention": "anti-grokked"})
    (0, 'record')
    >>> h = {"epoch": [0, 10, 20, 30, 40], "test_acc": [0.1, 0.995, 1.0, 1.0, 1.0], "train_acc": [0.2, 1, 1, 1, 1]}
    >>> retention_label({"history": h, "grok_epoch": 10, "final_epoch": 40, "config": {"max_epochs": 40}})
    (1, 'history')
    >>> retention_label({"history": h, "grok_epoch": 10, "final_epoch": 40, "config": {"max_epochs": 400}})
    (None, 'stopped 360 epochs before the horizon after grokking')
    """
    tag = record.get("retention")
    if tag is not None:
        return int(tag == "retained"), "record"
    horizon = (record.get("config") or {}).get("max_epochs")
    final = record.get("final_epoch")
    if record.get("status") == "diverged":
        return 0, "diverged"
    if record.get("grok_epoch") is None:
        return 0, "history (never grokked)"
    if horizon is not None and final is not None and final < horizon:
        return None, f"stopped {horizon - final} epochs before the horizon after grokking"
    return int(retention_of(record).tag == "retained"), "history"


def feature_row(record: dict, epoch: int, slope_window: int = 50, fit_threshold: float = 0.99) -> FeatureRow | str:
    """Features of one run at the history row at or just before ``epoch`` (or the reason it has none).

    ``epochs_since_fit``: epochs between the first evaluation with train accuracy >=
    ``fit_threshold`` and the row (0 if the training split is not fitted yet): the training clock
    that varies between runs when ``epoch`` is fixed. Slopes: least-squares slope per epoch of
    s_bar and sigma_H over the rows in ``[row epoch - slope_window, row epoch]``.
    """
    history = record.get("history") or {}
    epochs = np.asarray(history.get("epoch", []), dtype=float)
    if len(epochs) == 0 or epochs[0] > epoch:
        return f"no history row at or before epoch {epoch}"
    if epochs[-1] < epoch:  # stopped (grokked early, diverged) before E: no state at E to read
        return f"history ends at epoch {int(epochs[-1])} < {epoch} (status {record.get('status')})"
    row = int(np.searchsorted(epochs, epoch, side="right") - 1)
    at = float(epochs[row])

    def column(name):
        values = history.get(name)
        if values is None:
            return np.full(len(epochs), np.nan)
        return np.asarray([np.nan if v is None else v for v in values], dtype=float)

    features = {"epoch": at}
    for key, name in _HISTORY.items():
        features[name] = float(column(key)[row])
    train_acc = column("train_acc")[: row + 1]
    fitted = np.flatnonzero(train_acc >= fit_threshold)
    features["epochs_since_fit"] = float(at - epochs[fitted[0]]) if len(fitted) else 0.0
    wd = float(record["config"]["wd"])
    features["log10_wd"] = math.log10(wd) if wd > 0 else float("nan")
    n_params = _n_params(record)
    features["log10_params"] = math.log10(n_params) if n_params > 0 else float("nan")
    window = (epochs >= at - slope_window) & (epochs <= at)
    features["s_bar_slope"] = _slope(epochs[window], column("mean_similarity")[window])
    features["sigma_H_slope"] = _slope(epochs[window], column("entropy_std")[window])
    grok_epoch = record.get("grok_epoch")
    retained, source = retention_label(record)
    excluded = None
    if grok_epoch is not None and grok_epoch <= at:
        excluded = f"grokked at epoch {grok_epoch}, at or before the feature epoch {int(at)}"
    return FeatureRow(run_id=record.get("run_id"), group=f"{_scale_key(record)}|wd={wd:g}", features=features,
                      grokked=grok_epoch is not None and record.get("status") == "completed",
                      grok_epoch=grok_epoch, retained=retained,
                      retention_source=source, excluded=excluded,
                      meta={"wd": wd, "seed": record.get("config", {}).get("seed"), "n_params": n_params,
                            "status": record.get("status"), "row_epoch": at})


def feature_table(records: Iterable[dict], epoch: int, slope_window: int = 50, fit_threshold: float = 0.99):
    """``(rows, skipped)``: a :class:`FeatureRow` per usable run and ``[(run_id, reason)]`` for the rest."""
    rows, skipped = [], []
    for record in records:
        if record.get("status") not in ("completed", "diverged"):
            skipped.append((record.get("run_id"), f"status {record.get('status')}"))
            continue
        row = feature_row(record, epoch, slope_window, fit_threshold)
        if isinstance(row, str):
            skipped.append((record.get("run_id"), row))
        else:
            rows.append(row)
    return rows, skipped


def table_records(rows: Sequence[FeatureRow]) -> list[dict]:
    """Flat dicts (one per run) for a CSV: identifiers, targets, then every feature."""
    names = BASELINE_FEATURES + DIAGNOSTIC_FEATURES + TEST_FEATURES
    return [{"run_id": r.run_id, "group": r.group, **{k: r.meta.get(k) for k in ("wd", "seed", "n_params")},
             "grokked": int(r.grokked), "grok_epoch": r.grok_epoch, "retained": r.retained,
             "retention_source": r.retention_source, "excluded_from_grok_target": r.excluded or "",
             **{n: r.features.get(n) for n in names}} for r in rows]


def target_arrays(rows: Sequence[FeatureRow], target: str) -> tuple[list[FeatureRow], np.ndarray, list[str]]:
    """The rows entering ``target`` and their labels, plus the reasons for the rows left out."""
    if target == "grokked":
        kept = [r for r in rows if r.excluded is None]
        notes = [f"{r.run_id}: {r.excluded}" for r in rows if r.excluded is not None]
        return kept, np.asarray([int(r.grokked) for r in kept]), notes
    if target == "retained":
        kept = [r for r in rows if r.retained is not None]
        notes = [f"{r.run_id}: retention unobservable ({r.retention_source})" for r in rows if r.retained is None]
        return kept, np.asarray([r.retained for r in kept]), notes
    raise ValueError(f"target={target!r}: must be 'grokked' or 'retained'")


# --- models and cross-validation ------------------------------------------------------------
def make_classifier(name: str, seed: int, n_estimators: int):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "random_forest":
        return make_pipeline(SimpleImputer(strategy="median"),
                             RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1))
    if name == "logistic":
        return make_pipeline(SimpleImputer(strategy="median"), StandardScaler(),
                             LogisticRegression(C=1.0, max_iter=2000))
    raise ValueError(f"model={name!r}: must be one of {MODELS}")


def grouped_oof_predictions(X: np.ndarray, y: np.ndarray, groups: Sequence, model: str = "random_forest",
                            n_splits: int | None = None, seed: int = 0, n_estimators: int = 300):
    """Out-of-fold P(y = 1) with whole groups held out; ``(proba, info)`` or ``(None, "undefined: ...")``.

    ``n_splits=None``: leave one group out; otherwise ``GroupKFold(n_splits)``. A training fold with
    a single class cannot fit a classifier: its held-out runs get that fold's base rate (a
    constant model), counted in ``info["one_class_folds"]``.
    """
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    X, y, groups = np.asarray(X, dtype=float), np.asarray(y, dtype=int), np.asarray(groups)
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        return None, undefined(f"{n_groups} group(s): grouped cross-validation needs at least 2")
    if n_splits is not None and n_groups < n_splits:
        return None, undefined(f"{n_groups} groups < {n_splits} folds")
    splitter = LeaveOneGroupOut() if n_splits is None else GroupKFold(n_splits=n_splits)
    proba = np.full(len(y), np.nan)
    one_class = 0
    folds = 0
    for train, test in splitter.split(X, y, groups):
        folds += 1
        if len(np.unique(y[train])) < 2:
            proba[test] = float(y[train].mean())
            one_class += 1
            continue
        fitted = make_classifier(model, seed, n_estimators).fit(X[train], y[train])
        proba[test] = fitted.predict_proba(X[test])[:, list(fitted.classes_).index(1)]
    return proba, {"folds": folds, "one_class_folds": one_class, "n_groups": n_groups,
                   "cv": "LeaveOneGroupOut" if n_splits is None else f"GroupKFold({n_splits})"}


def mann_whitney_auc(y: np.ndarray, p: np.ndarray) -> float:
    """ROC AUC as the Mann-Whitney statistic (ties count 1/2); equals sklearn's ``roc_auc_score``
    and is ~100x faster, which matters inside the bootstrap.

    >>> mann_whitney_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    0.75
    """
    from scipy.stats import rankdata

    y = np.asarray(y, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    ranks = rankdata(p)
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def auc_study(rows: Sequence[FeatureRow], target: str = "grokked", feature_sets: dict | None = None,
              models: Sequence[str] = MODELS, n_splits: int | None = None, n_bootstrap: int = 2000,
              seed: int = 0, n_estimators: int = 300, min_valid_fraction: float = 0.5,
              compare: tuple[str, str] = ("baseline+diagnostics", "baseline")) -> dict:
    """AUC per (model, feature set) on pooled out-of-fold predictions, with cluster-bootstrap CIs.

    The bootstrap resamples *groups* with replacement (runs of one (scale, lambda) cell are not
    independent) and recomputes every AUC on the same resample, so the paired difference
    ``compare[0] - compare[1]`` has its own CI. Resamples with one class are skipped; when fewer
    than ``min_valid_fraction`` of them are usable the CI is undefined. The CI covers the
    evaluation noise of the fixed out-of-fold predictions, not the refitting noise of the models.

    Returns a dict: ``n, n_positive, n_groups, dropped`` and ``results[model][set] = {auc, auc_ci,
    brier, cv}`` and ``differences[model] = {diff, ci, p_le_0}`` (bootstrap share of resamples with
    a difference <= 0). Any of these can be an ``"undefined: ..."`` string.
    """
    feature_sets = dict(FEATURE_SETS if feature_sets is None else feature_sets)
    kept, y, dropped = target_arrays(rows, target)
    out = {"target": target, "n": len(kept), "n_positive": int(y.sum()) if len(y) else 0, "dropped": dropped,
           "feature_sets": {k: list(v) for k, v in feature_sets.items()}, "models": list(models),
           "n_bootstrap": n_bootstrap, "bootstrap": "groups resampled with replacement (cluster bootstrap)",
           "compare": list(compare)}
    groups = np.asarray([r.group for r in kept])
    out["n_groups"] = len(np.unique(groups)) if len(kept) else 0
    reason = None
    if len(kept) == 0:
        reason = "no run has this target"
    elif len(np.unique(y)) < 2:
        reason = f"one class only (all {len(y)} runs have {target} = {int(y[0])})"
    elif out["n_groups"] < 2:
        reason = f"{out['n_groups']} group: grouped cross-validation needs at least 2"
    if reason is not None:
        out["results"] = {m: {s: {"auc": undefined(reason)} for s in feature_sets} for m in models}
        out["differences"] = {m: {"diff": undefined(reason)} for m in models}
        out["undefined"] = undefined(reason)
        return out

    from sklearn.metrics import brier_score_loss

    predictions: dict[tuple[str, str], np.ndarray] = {}
    results: dict = {m: {} for m in models}
    for m in models:
        for name, columns in feature_sets.items():
            X = np.asarray([[r.features.get(c, np.nan) for c in columns] for r in kept], dtype=float)
            proba, info = grouped_oof_predictions(X, y, groups, m, n_splits, seed, n_estimators)
            if proba is None:
                results[m][name] = {"auc": info}
                continue
            predictions[(m, name)] = proba
            results[m][name] = {"auc": mann_whitney_auc(y, proba), "brier": float(brier_score_loss(y, proba)), "cv": info}

    # cluster bootstrap over groups, shared by every (model, set) so differences are paired
    rng = np.random.default_rng(seed)
    unique = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in unique]
    draws = {key: [] for key in predictions}
    valid = 0
    for _ in range(n_bootstrap):
        idx = np.concatenate([members[i] for i in rng.integers(0, len(unique), len(unique))])
        if len(np.unique(y[idx])) < 2:
            continue
        valid += 1
        for key, proba in predictions.items():
            draws[key].append(mann_whitney_auc(y[idx], proba[idx]))
    out["bootstrap_valid"] = valid
    enough = n_bootstrap > 0 and valid >= min_valid_fraction * n_bootstrap
    ci_reason = undefined(f"only {valid}/{n_bootstrap} bootstrap resamples had both classes")
    if n_bootstrap == 0:
        ci_reason = undefined("n_bootstrap = 0")
    for (m, name), values in draws.items():
        results[m][name]["auc_ci"] = ([float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]
                                      if enough else ci_reason)
    differences = {}
    for m in models:
        a, b = (m, compare[0]), (m, compare[1])
        if a not in predictions or b not in predictions:
            differences[m] = {"diff": undefined(f"{compare[0]} or {compare[1]} has no out-of-fold predictions")}
            continue
        diff = results[m][compare[0]]["auc"] - results[m][compare[1]]["auc"]
        entry = {"diff": diff}
        if enough:
            d = np.asarray(draws[a]) - np.asarray(draws[b])
            entry.update(ci=[float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))],
                         p_le_0=float(np.mean(d <= 0)))
        else:
            entry.update(ci=ci_reason, p_le_0=ci_reason)
        differences[m] = entry
    out["results"], out["differences"] = results, differences
    out["importances"] = _rf_importances(kept, y, feature_sets.get(compare[0]), seed, n_estimators) \
        if "random_forest" in models and compare[0] in feature_sets else None
    return out


def _rf_importances(kept, y, columns, seed, n_estimators) -> dict | None:
    """Impurity importances of a forest fitted on all runs (descriptive only, like the paper's)."""
    if columns is None:
        return None
    X = np.asarray([[r.features.get(c, np.nan) for c in columns] for r in kept], dtype=float)
    fitted = make_classifier("random_forest", seed, n_estimators).fit(X, y)
    imputer, forest = fitted.steps[0][1], fitted.steps[-1][1]
    names = [c for c, keep in zip(columns, ~np.all(np.isnan(X), axis=0)) if keep] \
        if not getattr(imputer, "keep_empty_features", False) else list(columns)
    return dict(sorted(zip(names, (float(v) for v in forest.feature_importances_)), key=lambda kv: -kv[1]))
