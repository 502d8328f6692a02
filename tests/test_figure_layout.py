"""What a figure shows a reader: the caption never overprints an axis label, and a legend names
only what is drawn."""

from __future__ import annotations

import numpy as np

from grok_lightning.plots.common import caption, place_caption, plt
from grok_lightning.plots.figures import figure_two_phase
from grok_lightning.plots.interventions import figure_forest


def _run(seed: int) -> dict:
    epochs = [0, 1, 2, 5, 10, 20, 50, 100, 200, 400]
    rng = np.random.default_rng(seed)
    return {"grok_epoch": 100, "history": {"epoch": epochs, "test_acc": list(np.linspace(0, 1, len(epochs))),
                                            "mean_similarity": list(0.9 + 0.01 * rng.random(len(epochs))),
                                            "entropy_std": list(0.05 + 0.01 * rng.random(len(epochs)))}}


def _below_every_axis_label(fig) -> bool:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    note = next(t for t in fig.texts if t.get_text().startswith("profile:"))
    top = note.get_window_extent(renderer).y1
    return all(ax.xaxis.label.get_window_extent(renderer).y0 > top and ax.get_tightbbox(renderer).y0 >= top
               for ax in fig.axes)


def test_a_long_caption_pushes_the_axes_up_instead_of_overprinting_them():
    details = "p=97 add frac=0.5 batch=512; transformer 2L x 4H, d 64, d_ff 256, init mha; " * 3
    scope = ("memorisation, grokking and the Phase-1 rise of s_bar",
             "Phase 2, the sigma_H peak and the s_bar dip after grokking (medium: 3 seeds x 2,000 epochs)")
    long = caption("smoke", details, "3 seeds (paper 50), horizon 300 epochs (paper 5,000)", smoke=scope)
    assert "needs a longer profile" in long and scope[1] in long
    fig = figure_two_phase([_run(0), _run(1)], long)
    assert _below_every_axis_label(fig)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([1, 2], [1, 2])
    ax.set_xlabel("x")
    place_caption(fig, "profile: smoke | " + "a caption of many words " * 60, bottom=0.05)
    assert _below_every_axis_label(fig)
    plt.close(fig)


def test_the_forest_legend_names_only_what_is_drawn():
    tests = [{"contrast": "B-A", "stratum": "1", "cohen_d": 0.5, "cohen_d_ci": [-0.5, 1.5], "n": 2}]
    for paper_d, expected in (({}, ["ours, < 4 pairs: not scored"]),
                              ({("B-A", "1"): (-1.2, None)}, ["paper d", "ours, < 4 pairs: not scored"])):
        fig = figure_forest(tests, paper_d, "profile: smoke | x")
        assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == expected
        plt.close(fig)


def test_e12_controls_at_a_lambda_the_paper_did_not_run_draw_no_empty_legend():
    import warnings

    from grok_lightning.plots.e12 import figure_controls

    records = [{**_run(seed), "config": {"seed": seed, "wd": 0.3}} for seed in (0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # matplotlib warns on a legend with nothing to name
        fig = figure_controls(records, {(0, 0.3): 200}, {}, "profile: smoke")
    assert [ax.get_legend() is not None for ax in fig.axes] == [True, False, False]
    plt.close(fig)


def test_the_held_out_auc_label_never_sits_on_a_bar_that_reaches_it():
    from grok_lightning.plots.predict import figure_holdout

    paper = {"random_forest": 0.799, "logistic": 0.678}
    result = {"results": {"random_forest": {"auc": 0.95, "auc_ci": [0.9, 1.0]},
                          "logistic": {"auc": 0.9, "auc_ci": [0.8, 1.0]}}, "n_test": 20, "test_pos": 10, "test_neg": 10}
    fig = figure_holdout({0.05: {"retained": 3}}, [0.05], result, paper, "profile: medium | x")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[1]
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    labels = [t.get_window_extent(renderer) for t in ax.texts if t.get_text().startswith("paper ")]
    assert len(bars) == 2 and len(labels) == 2
    assert not any(label.overlaps(bar) for label in labels for bar in bars)
    assert all(ax.get_window_extent(renderer).x1 >= label.x1 for label in labels)   # inside the axes
    plt.close(fig)


def test_fig5_bin_labels_of_neighbouring_lambdas_never_overprint():
    from grok_lightning.plots.regimes import figure_critical
    from grok_lightning.stats import fit_critical_weight_decay

    wds = (0.01, 0.03, 0.1, 0.3, 0.5, 0.7, 1.0, 2.0)     # 0.5, 0.7 and 1.0 within a fifth of a decade
    wd = [w for w in wds for _ in range(10)]
    grokked = [int(w >= 0.1 or (w == 0.03 and i < 5) or (w == 0.01 and i < 1)) for w in wds for i in range(10)]
    fit = fit_critical_weight_decay(wd, grokked, n_bootstrap=20)
    paper = {"wd_c": 0.0158, "wd_c_ci": [0.0109, 0.02], "nu": 0.757, "nu_ci": [0.725, 0.799]}
    fig = figure_critical(fit, fit, np.array([0.1, 1.0]), np.array([800.0, 120.0]), None, paper, "profile: medium | x")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t.get_window_extent(renderer) for t in fig.axes[0].texts if "/" in t.get_text()]
    assert len(labels) == len(wds)
    assert not any(a.overlaps(b) for i, a in enumerate(labels) for b in labels[i + 1:])
    assert all(label.y1 <= fig.axes[0].get_window_extent(renderer).y1 for label in labels)   # inside the axes
    plt.close(fig)
