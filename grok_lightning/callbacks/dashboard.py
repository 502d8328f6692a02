"""What a run writes to TensorBoard, and what each tag means.

Every scalar and image is written with ``step = epoch`` (epoch ``t`` = the state after ``t``
passes over the training split), so every chart shares one x axis. The only exception is the
opt-in per-step loss (:class:`~grok_lightning.callbacks.evaluation.StepLossLogger`), whose
section ``train_per_step/`` names its unit.

Each tag carries a one-line description (``SummaryMetadata.summary_description``), written with
the tag's first point in each event file, as TensorBoard reads it from there only. TensorBoard's
SCALARS and IMAGES tabs show it behind the (i) button of a card; the TIME SERIES tab does not.
The same texts are in ``docs/tensorboard.md``.

The HPARAMS table is a short curated set (:func:`curated_hparams`); the full configuration
stays in ``config.yaml`` and in the run record.

The CUSTOM SCALARS tab opens on :data:`LAYOUT` (:func:`log_layout`): train and test accuracy on one
chart, then s_bar and sigma_H, the three curves of grokking read together. :data:`TENSORBOARD_URL`
opens it with smoothing 0 (evaluations are spaced irregularly; a smoothed line lags far behind).
"""

from __future__ import annotations

import io
import re
import sys
import weakref
from pathlib import Path

from lightning.pytorch.loggers import TensorBoardLogger

from grok_lightning.records import weight_decay_of

__all__ = ["DESCRIPTIONS", "HPARAMS", "LAYOUT", "TENSORBOARD_URL", "describe", "curated_hparams", "log_scalars",
           "log_image", "log_hparams", "log_layout", "head_cosine_png", "tensorboard_command"]

_HEADS_AGREE = {True: "Higher = heads agree", False: "Lower = heads agree"}

DESCRIPTIONS = {
    "accuracy/train": "Accuracy on the whole training split after epoch t (evaluation mode).",
    "accuracy/test": "Accuracy on the held-out test split after epoch t; grokking is its late jump to the threshold "
                     "(0.99), the first such epoch is t_grok.",
    "loss/train": "Training objective on the whole training split after epoch t (evaluation mode).",
    "loss/test": "Training objective on the held-out test split after epoch t.",
    "loss/train_step_mean": "Mean of the mini-batch training losses of epoch t's optimizer steps "
                            "(train mode, each taken before its step).",
    "loss/train_step_max": "Largest mini-batch training loss of epoch t: loss spikes (slingshots) show here even "
                           "when the epoch mean hides them.",
    "weights/norm_total": "L2 norm of all parameters concatenated (Omega_total) after epoch t.",
    "diag/mean_similarity": f"s_bar: mean cosine similarity between pairs of heads' attention patterns on the test "
                            f"split, mean over layers; in [0, 1]. {_HEADS_AGREE[True]} (1 = identical heads).",
    "diag/entropy_std": f"sigma_H: std over heads of each head's mean attention-row entropy (nats), mean over "
                        f"layers. {_HEADS_AGREE[False]} (0 = equal entropies).",
    "diag/entropy_mean": "Mean over heads of the mean attention-row entropy (nats), mean over layers. "
                         "Lower = sharper attention.",
    "diag/entropy_range": f"Max minus min over heads of the mean attention-row entropy (nats), mean over layers. "
                          f"{_HEADS_AGREE[False]}.",
    "diag/spectral_gap": f"lambda_1 - lambda_2 of the H x H head-cosine matrix, mean over layers. "
                         f"{_HEADS_AGREE[True]} (H = all heads identical).",
    "diag/pr_norm": f"PR_norm = (R - 1)/(H - 1), R the participation ratio of the head-pattern covariance "
                    f"eigenvalues; in [0, 1]. {_HEADS_AGREE[False]} (0 = one shared pattern).",
    "diag/pr_norm_ratio": f"R / H, the other normalisation of the participation ratio; in [1/H, 1]. "
                          f"{_HEADS_AGREE[False]}.",
    "spectrum/rho_tian": "rho_tian: distance of the hidden-activation kernel F F^T on the training split from its "
                         "best a I + b 11^T fit (raw kernel, as Tian's code).",
    "spectrum/rho_tian_centred": "rho_tian with the class-centred kernel P F F^T in the numerator (the formula as "
                                 "printed).",
    "theorem6/sign_match_paper": "Theorem 6, Xu's check: fraction of the most similar hidden-unit pairs with "
                                 "sign(B_jl) = -sign(cos_jl).",
    "theorem6/sign_match_exact": "Theorem 6 as stated (leave-pair-out projector): 1.000 for any features (identity).",
    "theorem6/frac_neg_B_pos_cos": "Fraction of the most similar pairs with B_jl < 0 and cos_jl > 0 (repulsion).",
    "theorem6/median_abs_cos": "Median |cos| of the hidden-unit pairs that Theorem 6 is checked on.",
    "hp/grok_epoch": "t_grok: first evaluated epoch with test accuracy >= the threshold. One point, written when "
                     "the run ends; absent if it never grokked.",
    "hp/final_test_acc": "Test accuracy at the last evaluated epoch. One point, written when the run ends.",
    "hp/final_train_acc": "Training accuracy at the last evaluated epoch. One point, written when the run ends.",
    "hp/final_test_loss": "Test loss at the last evaluated epoch. One point, written when the run ends.",
    "train_per_step/loss": "Mini-batch training loss at every optimizer step. x axis: optimizer steps, NOT epochs.",
}

_LOCKIN = {
    "ratio23": "r = sigma_2 / sigma_3 of the Gram of the last {w} first-layer updates; the detector watches ln r.",
    "ratio12": "sigma_1 / sigma_2 of the Gram of the last {w} first-layer updates.",
    "slope": "Slope of ln(sigma_2 / sigma_3) over the last 25 epochs; lock-in fires when it exceeds the threshold "
             "(0.04 per epoch) at epoch >= 100.",
    "fired": "1 from the epoch the spectral lock-in detector (window {w}) fired, else 0.",
    "sigma": "sigma_{k}: k-th largest eigenvalue of the Gram of the last {w} first-layer updates.",
}


def describe(tag: str) -> str | None:
    """The one-line description of a tag (None for tags this package does not know).

    >>> describe("diag_layer_2/entropy_std").startswith("Layer 2: sigma_H")
    True
    >>> describe("lockin_w20/fired")
    '1 from the epoch the spectral lock-in detector (window 20) fired, else 0.'
    """
    if tag in DESCRIPTIONS:
        return DESCRIPTIONS[tag]
    match = re.fullmatch(r"diag_layer_(\d+)/(\w+)", tag)
    if match and f"diag/{match[2]}" in DESCRIPTIONS:
        return f"Layer {match[1]}: " + DESCRIPTIONS[f"diag/{match[2]}"].replace(", mean over layers", "")
    match = re.fullmatch(r"lockin_w(\d+)/(ratio23|ratio12|slope|fired|sigma(\d+))", tag)
    if match:
        return _LOCKIN["sigma" if match[3] else match[2]].format(w=match[1], k=match[3])
    match = re.fullmatch(r"head_cosine/layer_(\d+)", tag)
    if match:
        return (f"Layer {match[1]}: cosine similarity of every pair of heads' attention patterns on the test split "
                f"(fixed colour scale 0.5-1; uniform yellow = heads agree). At the image cadence, t_grok and the "
                f"final epoch.")
    return None


# --- hparams ------------------------------------------------------------------------------
HPARAMS = {  # name -> description (the HPARAMS tab shows it on the column)
    "arch": "Architecture (transformer, a probe, or Tian's two-layer network and its activation).",
    "shape": "Model shape: layers L, heads H, d_model, d_ff (probes: their builder arguments; Tian: hidden units K).",
    "weight decay": "AdamW's decoupled weight decay lambda (Tian runs: Adam's coupled L2 eta).",
    "lr": "Learning rate (constant).",
    "betas": "Adam(W) betas.",
    "seed": "seed_everything: initialisation and data order.",
    "operation": "The modular operation (a op b mod p).",
    "p": "The modulus p (Tian runs: M).",
    "train fraction": "Fraction of all (a, b) pairs used for training.",
    "profile": "Run profile: paper, smoke, custom (or a test's).",
    "horizon": "trainer.max_epochs: the epochs the run may train (grok.extra_epochs may stop it earlier).",
}
#: TensorBoard shows five columns by default, those marked as differing between runs first; these
#: are the five that tell this package's runs apart
SHOWN_FIRST = ("arch", "shape", "weight decay", "lr", "seed")


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def curated_hparams(config: dict) -> dict:
    """The HPARAMS table: the settings that tell runs apart, under readable names.

    ``config`` is a run record's ``config`` (``model``, ``data``, ``module``, ``seed``,
    ``max_epochs``, ``profile``). Real numbers stay numbers (sortable, plottable); everything else
    is text: booleans, and integers too, which TensorBoard would print with five significant
    digits (``200.00``).
    """
    model, data = config.get("model", {}), config.get("data", {})
    if config.get("module") == "TianModule":  # Xu's two-layer network, torch Adam (default betas), a + b mod M
        arch, shape = f"two-layer {model.get('activation', 'x2')}", f"K={model.get('hidden')}"
        betas, operation, p = (0.9, 0.999), "add", model.get("M")
    else:
        arch = model.get("arch", config.get("module", "?"))
        if arch == "transformer":
            # short: the HPARAMS table cuts a cell at about 16 characters
            shape = f"{model.get('n_layers')}L {model.get('n_heads')}H d{model.get('d_model')} ff{model.get('d_ff')}"
        else:
            kwargs = sorted((model.get("arch_kwargs") or {}).items())
            shape = ", ".join(f"{k}={_text(v)}" for k, v in kwargs) or "default"
        betas, operation, p = model.get("betas"), data.get("operation"), data.get("p")
    table = {
        "arch": arch, "shape": shape, "weight decay": config.get("wd", weight_decay_of(model)), "lr": model.get("lr"), "betas": betas,
        "seed": config.get("seed"), "operation": operation, "p": p, "train fraction": data.get("train_fraction"),
        "profile": config.get("profile"), "horizon": config.get("max_epochs"),
    }
    return {k: float(v) if isinstance(v, float) else _text(v) for k, v in table.items() if v is not None}


# --- the CUSTOM SCALARS layout ------------------------------------------------------------------
#: category -> [(chart title, tag regexes)]: what a reader of a grokking run looks at first, in order
LAYOUT = {
    "grokking": [
        ("accuracy: train and test (grokking = test's late jump)", [r"^accuracy/(train|test)$"]),
        ("s_bar: mean head cosine (higher = heads agree)", [r"^diag/mean_similarity$"]),
        ("sigma_H: entropy std over heads (lower = heads agree)", [r"^diag/entropy_std$"]),
        ("loss: train and test", [r"^loss/(train|test)$"]),
    ],
    "per layer": [
        ("s_bar per layer", [r"^diag_layer_\d+/mean_similarity$"]),
        ("sigma_H per layer", [r"^diag_layer_\d+/entropy_std$"]),
    ],
}
#: the URL that opens the layout with smoothing 0 (the tab keeps "ignore outliers" in the browser)
TENSORBOARD_URL = "http://localhost:6006/#custom_scalars&_smoothingWeight=0"


def tensorboard_command(log_dir: str, python: str | None = None) -> str:
    """A command that starts TensorBoard on ``log_dir`` from any shell, the virtual environment
    activated or not: the ``tensorboard`` script beside this Python (``.venv/bin/tensorboard``),
    else ``python -m tensorboard.main`` with this Python. Paths under the working directory are
    given relative to it.
    """
    python = Path(python or sys.executable)
    script = python.parent / "tensorboard"
    command = _shown(script) if script.is_file() else f"{_shown(python)} -m tensorboard.main"
    return f"{command} --logdir {log_dir}"


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it (``.venv/bin/python``), else absolute."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path.absolute())


def log_layout(trainer) -> None:
    """Write :data:`LAYOUT` once to every TensorBoard logger (TensorBoard merges the layouts of all
    runs under one --logdir, so a sweep shows one layout)."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.custom_scalar import layout_pb2, metadata
    from tensorboard.util.tensor_util import make_tensor_proto

    layout = layout_pb2.Layout(category=[
        layout_pb2.Category(title=category, chart=[
            layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=tags))
            for title, tags in charts])
        for category, charts in LAYOUT.items()])
    # what the plugin's summary.pb writes, without the TensorFlow it imports for it
    value = Summary.Value(tag=metadata.CONFIG_SUMMARY_TAG, metadata=metadata.create_summary_metadata(),
                          tensor=make_tensor_proto(layout.SerializeToString(), dtype="string"))
    for writer in _writers(trainer):
        _add(writer, [value])


# --- writing ------------------------------------------------------------------------------
_described: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # writer -> tags already described


def _writers(trainer) -> list:
    """The SummaryWriters behind the trainer's TensorBoardLoggers."""
    return [logger.experiment for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)]


def _add(writer, values: list, step: int | None = None) -> None:
    from tensorboard.compat.proto.summary_pb2 import Summary

    writer._get_file_writer().add_summary(Summary(value=values), step)


def _value(writer, tag: str, plugin, data_class: str, **field):
    """A summary value; the tag's first one in this writer's file carries its description."""
    from tensorboard.compat.proto import summary_pb2

    value = summary_pb2.Summary.Value(tag=tag, **field)
    seen = _described.setdefault(writer, set())
    if tag not in seen:  # TensorBoard keeps the metadata of a tag's first point in a file only
        seen.add(tag)
        # display name = tag: an empty one makes the SCALARS tab print the tag twice on a card
        metadata = plugin.create_summary_metadata(display_name=tag, description=describe(tag) or "")
        # with a data class set, TensorBoard's fast (Rust) loader keeps this metadata, description
        # included, instead of making up its own for an old-style value
        metadata.data_class = getattr(summary_pb2, data_class)
        value.metadata.CopyFrom(metadata)
    return value


def log_scalars(trainer, scalars: dict[str, float], step: int) -> None:
    """Write ``scalars`` at ``step`` to every logger; TensorBoard gets them with descriptions."""
    from tensorboard.plugins.scalar import metadata

    if not scalars:
        return
    for logger in trainer.loggers:
        if not isinstance(logger, TensorBoardLogger):
            logger.log_metrics(scalars, step=step)
    for writer in _writers(trainer):
        _add(writer, [_value(writer, tag, metadata, "DATA_CLASS_SCALAR", simple_value=float(v))
                      for tag, v in scalars.items()], step)


def log_image(trainer, tag: str, png: bytes, size: tuple[int, int], step: int) -> None:
    """Write a PNG (``size`` = (width, height)) as an image with its description (TensorBoard only)."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.image import metadata

    width, height = size
    image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=png)
    for writer in _writers(trainer):
        _add(writer, [_value(writer, tag, metadata, "DATA_CLASS_BLOB_SEQUENCE", image=image)], step)


def log_hparams(trainer, hparams: dict, metrics: tuple[str, ...]) -> None:
    """The HPARAMS entry: ``hparams`` and the names of the outcome ``metrics``, whose values are
    written once, at the end of the run, by :func:`log_scalars` (no placeholder point)."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    infos, start = [], plugin_data_pb2.SessionStartInfo()
    for name, value in hparams.items():
        number = isinstance(value, float)
        infos.append(api_pb2.HParamInfo(name=name, description=HPARAMS.get(name, ""), differs=name in SHOWN_FIRST,
                                        type=api_pb2.DATA_TYPE_FLOAT64 if number else api_pb2.DATA_TYPE_STRING))
        if number:
            start.hparams[name].number_value = value
        else:
            start.hparams[name].string_value = value
    outcomes = [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag), description=describe(tag) or "")
                for tag in metrics]
    experiment = plugin_data_pb2.HParamsPluginData(
        experiment=api_pb2.Experiment(hparam_infos=infos, metric_infos=outcomes))
    session = plugin_data_pb2.HParamsPluginData(session_start_info=start)
    values = [Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data))
              for tag, data in ((metadata.EXPERIMENT_TAG, experiment), (metadata.SESSION_START_INFO_TAG, session))]
    for writer in _writers(trainer):
        _add(writer, values)


# --- images -------------------------------------------------------------------------------
def head_cosine_png(matrix, layer: int, epoch: int, note: str = "", vmin: float = 0.5) -> tuple[bytes, tuple[int, int]]:
    """One layer's (H, H) head-cosine matrix as a labelled PNG: heads on both axes, the layer and
    epoch in the title, a colour bar on the fixed scale [vmin, 1].

    Why a fixed scale: head cosines of attention probabilities live in about [0.7, 1] here, so
    images compare across epochs and runs only if the colours mean the same number; values below
    ``vmin`` saturate dark (the colour bar's arrow).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    values = matrix.detach().double().cpu().numpy()
    n = values.shape[0]
    figure = Figure(figsize=(4.2, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    shown = axes.imshow(values, cmap="viridis", vmin=vmin, vmax=1.0)
    ticks = range(n) if n <= 16 else range(0, n, max(1, n // 8))
    axes.set_xticks(list(ticks), [str(h) for h in ticks])
    axes.set_yticks(list(ticks), [str(h) for h in ticks])
    axes.set_xlabel("head")
    axes.set_ylabel("head")
    if n <= 8:  # small enough to print the numbers the colours stand for
        for i in range(n):
            for j in range(n):
                colour = "black" if values[i, j] > vmin + 0.6 * (1 - vmin) else "white"
                axes.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=6.5, color=colour)
    axes.set_title(f"layer {layer}, epoch {epoch}{note}", fontsize=10)
    bar = figure.colorbar(shown, ax=axes, extend="min" if values.min() < vmin else "neither")
    bar.set_label("cosine between heads' attention")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    width, height = figure.canvas.get_width_height()
    return buffer.getvalue(), (width, height)
