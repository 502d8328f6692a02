"""E11's held-out test by weight decay: fit on some lambda cells, score the runs of unseen ones.

The paper (arXiv 2605.20441, section 4.8) fits a random forest and a logistic regression on
features read at epoch 1,000 of its training runs and scores 50 runs at two weight decays the
training set never saw. This module runs that design on any pool of
:class:`~grok_lightning.stats.predict.FeatureRow` with a retention label:

* :func:`label_cells`: retained / not retained runs per lambda cell;
* :func:`choose_holdout`: which lambda cells to hold out, by a rule on the labels alone (never on a
  fit): both labels must occur among the held-out runs (an AUC needs both) and among the
  training runs (a classifier needs both). Among the splits that allow it, cells in which both
  labels occur come first (a cell of one label adds only the between-lambda contrast), then
  cells inside the training lambdas' range (the paper's 0.025 / 0.04 lie inside its grid, so its
  classifier interpolates in lambda), then fewer held-out cells, then the larger minority class;
* :func:`holdout_auc`: each model fitted on the training cells, AUC and Brier score of the
  held-out runs, and a stratified bootstrap over the held-out runs (positives and negatives
  resampled separately, so every resample has both) for 95% intervals. The intervals cover the
  evaluation noise of the fixed predictions, not the refitting noise. With fewer than
  ``min_per_class`` held-out runs of either label the intervals are kept but marked
  untrustworthy (``too_few``): the bootstrap of an AUC over two or three runs of one class takes
  a handful of values, and a perfect ranking gives a zero-width interval;
* :func:`within_cell_auc`: leave-one-run-out AUC inside one lambda cell (context: not E11's
  design, since lambda cannot help there).

Degenerate input gives ``"undefined: <reason>"`` strings, never numbers. Needs scikit-learn.
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np

from grok_lightning.stats.predict import (
    FeatureRow,
    grouped_oof_predictions,
    make_classifier,
    mann_whitney_auc,
    undefined,
)

__all__ = ["PAPER_FEATURES", "MIN_PER_CLASS", "label_cells", "choose_holdout", "holdout_auc", "within_cell_auc",
           "cells_text"]

#: E11's features (sigma_H, s_bar, weight norm, test accuracy, weight decay) as FeatureRow columns
PAPER_FEATURES = ("sigma_H", "s_bar", "weight_norm", "test_acc", "log10_wd")
#: fewest held-out runs of each label for a trustworthy bootstrap interval (the paper's own
#: held-out set had 6 runs of its minority label: 44 retained of 50)
MIN_PER_CLASS = 5


def _labelled(rows: Sequence[FeatureRow]) -> list[FeatureRow]:
    return [r for r in rows if r.retained is not None]


def label_cells(rows: Sequence[FeatureRow]) -> dict[float, tuple[int, int]]:
    """``{lambda: (retained, not retained)}`` over the runs with a label, lambdas ascending."""
    cells: dict[float, list[int]] = {}
    for r in _labelled(rows):
        cells.setdefault(float(r.meta["wd"]), [0, 0])[0 if r.retained else 1] += 1
    return {wd: (pos, neg) for wd, (pos, neg) in sorted(cells.items())}


def cells_text(cells: dict[float, tuple[int, int]]) -> str:
    """'0.01 0/3, 1 10/2' (retained/not per lambda).

    >>> cells_text({0.01: (0, 3), 1.0: (10, 2)})
    '0.01 0/3, 1 10/2'
    """
    return ", ".join(f"{wd:g} {pos}/{neg}" for wd, (pos, neg) in cells.items())


def _counts(cells, wds) -> tuple[int, int]:
    return sum(cells[w][0] for w in wds), sum(cells[w][1] for w in wds)


def choose_holdout(rows: Sequence[FeatureRow], max_cells: int = 2) -> dict:
    """The held-out lambda cells by the rule of the module docstring.

    Returns ``{"cells", "held_out", "train", "interior", "why"}``, or ``{"cells", "held_out": [],
    "invalid": reason}`` when no split of at most ``max_cells`` held-out cells leaves both labels
    on both sides.

    >>> from grok_lightning.stats.predict import FeatureRow
    >>> mk = lambda wd, y: FeatureRow("r", f"wd={wd}", {}, bool(y), None, y, "record", meta={"wd": wd})
    >>> pool = [mk(0.01, 0)] * 3 + [mk(0.05, 1)] * 4 + [mk(0.05, 0), mk(1.0, 1), mk(1.0, 0)]
    >>> choose_holdout(pool)["held_out"]
    [0.05]
    >>> choose_holdout([mk(0.01, 0)] * 3 + [mk(1.0, 1), mk(1.0, 0)])["invalid"][:40]
    'no choice of at most 2 held-out lambda c'
    """
    cells = label_cells(rows)
    wds = list(cells)
    ranked = []
    for k in range(1, max_cells + 1):
        for held in combinations(wds, k):
            train = [w for w in wds if w not in held]
            if min(_counts(cells, held)) == 0 or min(_counts(cells, train)) == 0:
                continue
            mixed = sum(min(cells[w]) > 0 for w in held)
            interior = all(min(train) < w < max(train) for w in held)
            ranked.append(((mixed, interior, -k, min(_counts(cells, held))), list(held), train))
    if not ranked:
        total = _counts(cells, wds)
        if min(total) == 0:
            reason = f"one label only ({total[0]} retained, {total[1]} not)"
        else:
            mixed = [w for w in wds if min(cells[w]) > 0]
            left = [f"holding out lambda {w:g} ({cells[w][0]}/{cells[w][1]}) leaves the training runs "
                    f"{'%d/%d' % _counts(cells, [v for v in wds if v != w])}" for w in mixed]
            reason = (f"no choice of at most {max_cells} held-out lambda cells leaves both labels among the held-out "
                      f"and among the training runs: " + ("; ".join(left) if left else "no lambda has both labels")
                      + f" (retained/not by lambda: {cells_text(cells)})")
        return {"cells": cells, "held_out": [], "invalid": reason}
    (mixed, interior, _, _), held, train = max(ranked, key=lambda entry: entry[0])  # ties: smaller lambdas
    why = ["both labels occur in the held-out cells" if mixed == len(held) else
           "a held-out cell has one label, so the AUC is partly a contrast between lambdas"]
    why.append("inside the training lambdas' range, as in the paper's split" if interior else
               "outside the training lambdas' range: the classifier extrapolates in lambda, which the paper's "
               "split did not ask of it")
    return {"cells": cells, "held_out": held, "train": train, "interior": interior, "why": "; ".join(why)}


def _matrix(rows: Sequence[FeatureRow], features: Sequence[str]) -> np.ndarray:
    return np.asarray([[r.features.get(c, np.nan) for c in features] for r in rows], dtype=float)


def holdout_auc(rows: Sequence[FeatureRow], held_out: Sequence[float], features: Sequence[str] = PAPER_FEATURES,
                models: Sequence[str] = ("random_forest", "logistic"), n_bootstrap: int = 2000, seed: int = 0,
                n_estimators: int = 300, min_per_class: int = MIN_PER_CLASS) -> dict:
    """Fit on the labelled runs outside ``held_out`` (lambdas), score the runs inside it.

    Returns the counts (``n_train``, ``train_pos``, ``train_neg``, ``n_test``, ``test_pos``,
    ``test_neg``), ``too_few`` (a reason or None) and ``results[model] = {auc, auc_ci, brier,
    brier_ci, proba, run_ids}``; ``undefined`` instead when either side lacks a label.
    """
    kept = _labelled(rows)
    held = {float(w) for w in held_out}
    test = [r for r in kept if float(r.meta["wd"]) in held]
    train = [r for r in kept if float(r.meta["wd"]) not in held]
    y_test = np.asarray([r.retained for r in test], dtype=int)
    y_train = np.asarray([r.retained for r in train], dtype=int)
    out = {"held_out": sorted(held), "features": list(features), "n_train": len(train),
           "train_pos": int(y_train.sum()), "train_neg": int(len(y_train) - y_train.sum()), "n_test": len(test),
           "test_pos": int(y_test.sum()), "test_neg": int(len(y_test) - y_test.sum()), "n_bootstrap": n_bootstrap,
           "bootstrap": "held-out runs resampled with replacement within each label", "min_per_class": min_per_class}
    if min(out["train_pos"], out["train_neg"]) == 0:
        out["undefined"] = undefined(f"the training runs have one label ({out['train_pos']} retained, "
                                     f"{out['train_neg']} not)")
    elif min(out["test_pos"], out["test_neg"]) == 0:
        out["undefined"] = undefined(f"the held-out runs have one label ({out['test_pos']} retained, "
                                     f"{out['test_neg']} not)")
    if "undefined" in out:
        out["results"] = {m: {"auc": out["undefined"]} for m in models}
        return out
    minority = min(out["test_pos"], out["test_neg"])
    out["too_few"] = None if minority >= min_per_class else (
        f"{minority} held-out run(s) of the rarer label (< {min_per_class}): a bootstrap interval "
        f"of an AUC over so few takes a handful of values")
    X_train, X_test = _matrix(train, features), _matrix(test, features)
    proba = {}
    for m in models:
        fitted = make_classifier(m, seed, n_estimators).fit(X_train, y_train)
        proba[m] = fitted.predict_proba(X_test)[:, list(fitted.classes_).index(1)]
    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(y_test == 1), np.flatnonzero(y_test == 0)
    draws = {m: ([], []) for m in models}
    for _ in range(n_bootstrap):
        idx = np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))])
        for m in models:
            draws[m][0].append(mann_whitney_auc(y_test[idx], proba[m][idx]))
            draws[m][1].append(float(np.mean((proba[m][idx] - y_test[idx]) ** 2)))

    def interval(values):
        return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if values else \
            undefined("n_bootstrap = 0")

    out["results"] = {m: {"auc": mann_whitney_auc(y_test, proba[m]), "auc_ci": interval(draws[m][0]),
                          "brier": float(np.mean((proba[m] - y_test) ** 2)), "brier_ci": interval(draws[m][1]),
                          "proba": [float(p) for p in proba[m]], "labels": [int(v) for v in y_test],
                          "run_ids": [r.run_id for r in test]} for m in models}
    return out


def within_cell_auc(rows: Sequence[FeatureRow], wd: float, features: Sequence[str] = PAPER_FEATURES,
                    models: Sequence[str] = ("random_forest", "logistic"), seed: int = 0,
                    n_estimators: int = 300) -> dict:
    """Leave-one-run-out AUC among the labelled runs of one lambda cell (no interval: context only)."""
    cell = [r for r in _labelled(rows) if float(r.meta["wd"]) == float(wd)]
    y = np.asarray([r.retained for r in cell], dtype=int)
    out = {"wd": float(wd), "n": len(cell), "pos": int(y.sum()), "neg": int(len(y) - y.sum())}
    if min(out["pos"], out["neg"]) < 2:  # a left-out run of a single-run label leaves its fold one label
        out["undefined"] = undefined(f"{out['pos']} retained, {out['neg']} not: leave-one-out needs 2 of each")
        return out
    X = _matrix(cell, features)
    out["results"] = {}
    for m in models:
        proba, info = grouped_oof_predictions(X, y, [r.run_id for r in cell], m, seed=seed, n_estimators=n_estimators)
        out["results"][m] = {"auc": info if proba is None else mann_whitney_auc(y, proba)}
    return out
