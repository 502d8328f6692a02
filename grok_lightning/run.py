"""One run: a resolved configuration -> DataModule + LightningModule + callbacks + Trainer.

This is the only place that wires those together. ``grok-lightning fit`` (the LightningCLI way)
and every sweep launcher go through :class:`GrokCLI`, so a run behaves the same wherever it runs.

What is always attached, in this order:
``ScheduledEvaluation`` (the evaluation pipeline: forward, then the contributors
``GrokDetector`` -> ``AttentionDiagnostics`` -> detectors from the config, then the consumers:
config callbacks -> ``RunProgressBar`` -> ``RunRecorder``; see its module) -> ``StopState`` ->
the contributors and config callbacks (their other hooks) -> ``RunRecorder`` -> ``ResumeCheckpoint`` (``last.ckpt`` every ``run.checkpoint_every`` epochs, every
``run.checkpoint_minutes`` of wall time, and on SIGINT/SIGTERM, which stop the run gracefully).
Checkpoints are read with ``weights_only=True`` only (:mod:`grok_lightning.checkpoint_io`).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import torch
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from grok_lightning.callbacks import AttentionDiagnostics, GrokDetector, RunRecorder, ScheduledEvaluation
from grok_lightning.callbacks.grok import StopState
from grok_lightning.callbacks.progress import RunProgressBar, summary_lines
from grok_lightning.callbacks.resume import ConfiguredOptimizer, ResumeCheckpoint, run_folder_lock
from grok_lightning.checkpoint_io import (
    SHAPE_KEYS,
    check_ckpt_path,
    checkpoint_differences,
    load_checkpoint,
    trainer_call,
)
from grok_lightning.config import (
    PARSER_MODE,
    ConfigError,
    environment_seed,
    require,
    require_choice,
    secure_parsing,
    trust_code,
    validate_run_config,
)

__all__ = ["GrokCLI", "RunSettings", "run_config"]

MATMUL_PRECISIONS = ("highest", "high", "medium")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


class _QuietLightning(logging.Filter):
    """Third-party lines that tell a user of this package nothing: an advertisement for a logging
    service, and "GPU/TPU/HPU available: False" when there is none (a GPU that is there but unused
    is still said)."""

    NOISE = ("💡 Tip:", "GPU available: False", "TPU available: False", "HPU available: False")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(self.NOISE)


def quiet_third_party() -> None:
    """Install the filter and silence torch's ``LeafSpec`` deprecation raised inside Lightning."""
    quiet = _QuietLightning()
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        log = logging.getLogger(name)
        if not any(isinstance(f, _QuietLightning) for f in log.filters):
            log.addFilter(quiet)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")


@dataclass
class RunSettings:
    """Run-level settings (``--run.*``), recorded in every record's ``config``.

    Args:
        profile: ``smoke``, ``paper`` or ``custom``; stated in records, figures and hparams.
        checkpoint_every: save ``last.ckpt`` every this many epochs (0: only on a stop signal).
        checkpoint_minutes: ... and at the first epoch end after this much wall time since the
            last save (0: not by time; ignored when ``checkpoint_every`` is 0).
        record_path: where the record goes (default: ``<log_dir>/record.json``).
        name: a readable run name for the record (sweeps set it).
        run_id: a stable id (sweeps derive it from the resolved config).
        flush_denormal: ``torch.set_flush_denormal(True)``: measured faster on CPU (docs/performance.md).
        threads: torch intra-op threads (``None`` keeps torch's default).
        diagnostics: attach :class:`AttentionDiagnostics` (``--diagnostics.*`` configures it).
        matmul_precision: ``torch.set_float32_matmul_precision``: ``highest`` (true FP32, the
            default), ``high`` (TF32 tensor cores on Ampere and later) or ``medium`` (bf16
            products). Opt-in: docs/performance.md says what it changes and when it may be used.
            bf16 autocast is Lightning's own ``--trainer.precision bf16-mixed``.
        start_from: another run's checkpoint this run starts from when it has none of its own
            (sweeps; with ``grok-lightning fit`` pass ``--ckpt_path``). The record keeps that run's
            history up to there and says ``started_from``.
        compile: ``torch.compile`` mode for the training step's forward and loss (``default``,
            ``reduce-overhead``: CUDA graphs on a GPU, ``max-autotune``), or ``None`` (eager, the
            default). Single runs compile the module's training loss, ensembles the vmapped member
            losses; evaluation and diagnostics stay eager. Measured no gain on CPU
            (docs/performance.md); meant for GPUs.
        resume: continue the latest run of this logger (``<save_dir>/<name>/version_*``, or the
            given ``version``) from its ``checkpoints/last.ckpt``, in the same folder and record
            (``grok-lightning fit ... --resume``); a new run when there is none.
        override_hparams: continue a checkpoint (``--resume``, ``--ckpt_path``) with hyperparameters
            other than the ones it was trained with (weight decay, lr, seed, data order...): without
            it any difference is refused in one line naming the field. The record takes the new
            values and lists the changes under ``overrides``. A different model shape never loads.
    """

    profile: str = "custom"
    name: str | None = None
    checkpoint_every: int = 50
    checkpoint_minutes: float = 5.0
    record_path: str | None = None
    run_id: str | None = None
    flush_denormal: bool = True
    threads: int | None = None
    diagnostics: bool = True
    matmul_precision: str = "highest"
    start_from: str | None = None
    compile: str | None = None
    resume: bool = False
    override_hparams: bool = False


class SaveConfig(SaveConfigCallback):
    """Lightning's ``config.yaml`` of a run, written atomically (a new file renamed into place): a
    symbolic link planted at ``<log_dir>/config.yaml`` is replaced, never written through."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        from pathlib import Path

        from grok_lightning.records import write_text_atomic

        if self.already_saved:
            return
        if self.save_to_log_dir and trainer.is_global_zero:
            Path(trainer.log_dir).mkdir(parents=True, exist_ok=True)
            write_text_atomic(Path(trainer.log_dir) / self.config_filename, self.parser.dump(self.config, skip_none=False))
        if trainer.is_global_zero:
            self.save_config(trainer, pl_module, stage)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)


class GrokCLI(LightningCLI):
    """LightningCLI with the package's callbacks, run settings and grokking criterion."""

    def __init__(self, *args, **kwargs):
        quiet_third_party()
        # before the parser exists: YAML read by this package's rules, dotted names only from
        # trusted modules (a config is data, never code)
        secure_parsing()
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("save_config_callback", SaveConfig)
        kwargs.setdefault("subclass_mode_model", True)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("auto_configure_optimizers", False)
        super().__init__(LightningModule, LightningDataModule, *args, **kwargs)

    def init_parser(self, **kwargs):
        # no abbreviations: `--trainer.max_epoch 3` is a typo to report, not `max_epochs`
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("parser_mode", PARSER_MODE)
        return super().init_parser(**kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_class_arguments(RunSettings, "run")
        parser.add_class_arguments(GrokDetector, "grok")
        parser.add_class_arguments(AttentionDiagnostics, "diagnostics", skip={"grok"})

    def _section(self, name: str) -> dict:
        config = self.config.get(self.subcommand) if self.subcommand else self.config
        return dict(config.get(name) or {})

    def _set_seed(self) -> None:
        # Lightning logs "Seed set to N" to stderr here, before the classes are built; it is said in
        # after_instantiate_classes instead, so a bad value is the only line a person sees
        seed = self._get(self.config, "seed_everything")
        require(seed is None or isinstance(seed, bool) or (isinstance(seed, int) and 0 <= seed < 2**32),
                "seed_everything", seed, "must be an integer in [0, 2**32)")
        environment_seed()  # a bad PL_GLOBAL_SEED is one line, whatever seed_everything says
        seed_log = logging.getLogger("lightning.fabric.utilities.seed")
        level = seed_log.level
        seed_log.setLevel(logging.WARNING)
        try:
            super()._set_seed()
        finally:
            seed_log.setLevel(level)

    def after_instantiate_classes(self) -> None:
        super().after_instantiate_classes()
        self._resume_from = None
        if self.subcommand == "fit":  # the checkpoint fit continues, checked before any line is logged
            given = self.config.fit.get("ckpt_path")
            if given is None and RunSettings(**self._section("run")).resume:
                given = resume_latest(self.trainer)
            self.check_resume(given)
            self._resume_from = given
            if given is not None:
                logging.getLogger("lightning.pytorch").info(f"continuing {self.trainer.log_dir} from {given}")
        seed = self._get(self.config, "seed_everything")
        if seed is not False and seed is not None:
            logging.getLogger("lightning.fabric.utilities.seed").info(f"Seed set to {seed}")

    def before_instantiate_classes(self) -> None:
        config = self.config.get(self.subcommand) if self.subcommand else self.config
        config = config.as_dict() if hasattr(config, "as_dict") else dict(config)
        validate_run_config(config)
        check_fits_in_memory(config)
        check_output_folders(config)

    def _parse_ckpt_path(self) -> None:
        # LightningCLI would copy the hyperparameters of --ckpt_path over the command line's here,
        # silently (and import the class the checkpoint names): they are compared with it instead,
        # before training (check_resume). A missing or unusable file is one line now.
        subcommand = self.config.get("subcommand")
        if subcommand:
            check_ckpt_path(self.config[subcommand].get("ckpt_path"), resume=subcommand == "fit")

    def check_resume(self, ckpt_path: str | None) -> None:
        """Before training from ``ckpt_path``: the checkpoint's hyperparameters equal this run's.

        Another model shape (or class, or p) is one line, always. Any other difference is one line
        naming the field unless ``--run.override_hparams`` (or ``run.start_from`` names the
        checkpoint: another run's, started from on purpose); then the run trains with its own
        values (:class:`ConfiguredOptimizer`) and a resumed record lists the changes."""
        if ckpt_path is None:
            return
        run = RunSettings(**self._section("run"))
        config = self.config.get(self.subcommand) if self.subcommand else self.config
        differences = checkpoint_differences(load_checkpoint(ckpt_path), config.as_dict())
        for field, saved, now in differences:
            if field.split(".", 1)[-1] in (*SHAPE_KEYS, "class_path", "p"):
                raise ConfigError(f"ckpt_path={ckpt_path}: a checkpoint of another model ({field.split('.', 1)[-1]} "
                                  f"{saved!r}, this run {now!r})")
        started_from = run.start_from is not None and str(run.start_from) == str(ckpt_path)
        if differences and not (run.override_hparams or started_from):
            field, saved, now = differences[0]
            more = f" (and {len(differences) - 1} more)" if len(differences) > 1 else ""
            raise ConfigError(f"{field}={now!r}: the checkpoint {ckpt_path} was trained with {saved!r}{more}; give its "
                              "value, or --run.override_hparams true to continue it with this one (the record says so)")
        if differences or started_from:
            self.trainer.callbacks.append(ConfiguredOptimizer())
        if differences and not started_from:
            recorder = next(c for c in self.trainer.callbacks if isinstance(c, RunRecorder))
            recorder.overridden = {field: {"checkpoint": saved, "now": now} for field, saved, now in differences}

    # the subcommands: checkpoints are loaded with weights_only=True (grok_lightning.checkpoint_io)
    def fit(self, **kwargs):
        if kwargs.get("ckpt_path") is None:
            kwargs["ckpt_path"] = self._resume_from  # --resume (after_instantiate_classes)
        # one process trains a run folder (two `fit --resume`): held once the checkpoint is checked
        trainer_call(self.trainer.fit, hold=lambda: run_folder_lock(self.trainer), **kwargs)
        recorder = next(c for c in self.trainer.callbacks if isinstance(c, RunRecorder))
        if recorder.record is not None:
            print("\n".join(summary_lines(recorder.record, self.trainer.log_dir, str(recorder.path(self.trainer)))),
                  flush=True)
        stopped = stopped_by(self.trainer)
        if stopped is not None:  # the shell's convention for a process ended by a signal
            raise SystemExit(128 + stopped)

    def validate(self, **kwargs):
        trainer_call(self.trainer.validate, **kwargs)

    def test(self, **kwargs):
        trainer_call(self.trainer.test, **kwargs)

    def predict(self, **kwargs):
        trainer_call(self.trainer.predict, **kwargs)

    def instantiate_trainer(self, **kwargs):
        run = RunSettings(**self._section("run"))
        if run.flush_denormal:
            torch.set_flush_denormal(True)
        if run.threads:
            torch.set_num_threads(run.threads)
        require_choice("run.matmul_precision", run.matmul_precision, MATMUL_PRECISIONS)
        torch.set_float32_matmul_precision(run.matmul_precision)
        if run.compile is not None:
            require_choice("run.compile", run.compile, COMPILE_MODES)
            require(callable(getattr(self.model, "compile_training", None)), "run.compile", run.compile,
                    f"{type(self.model).__name__} has no compiled training step")
            self.model.compile_training(run.compile)
        # callbacks listed under trainer.callbacks in the YAML (already instantiated) come after
        # the package's own, in their order
        configured = self._get(self.config_init, "trainer", default={}).get("callbacks") or []
        if not isinstance(configured, list):
            configured = [configured]
        extra = list(configured) + list(kwargs.pop("callbacks", None) or [])
        seed = self._get(self.config, "seed_everything")  # an integer once _set_seed seeded the run
        if isinstance(seed, bool) or seed is None:  # `false`: Lightning seeded nothing; the data use the
            seed = environment_seed()  # environment's seed if one is set (the split's), else none was used
        info = {"profile": run.profile, "run_id": run.run_id, "name": run.name, "seed": seed}
        recorder = RunRecorder(record_path=run.record_path, run_info=info)
        progress = [RunProgressBar()] if self._get(self.config_init, "trainer", default={}).get(
            "enable_progress_bar", True) is not False else []
        # the evaluation pipeline, in its order: the forward, then what adds to the row (the
        # grokking detector first: the diagnostics image its t_grok), then what reads the row
        grok = GrokDetector(**self._section("grok"))
        contributors = [grok]
        if run.diagnostics and hasattr(self.model, "has_attention"):
            heads = getattr(self.model.hparams, "n_heads", None)
            require(not (self.model.has_attention and heads == 1), "model.n_heads", heads,
                    "the attention diagnostics compare heads (s_bar, spectral gap, PR_norm) and need at least 2; "
                    "--run.diagnostics false trains one head without them")
            contributors.append(AttentionDiagnostics(**self._section("diagnostics"), grok=grok))
        contributors += [c for c in extra if callable(getattr(c, "contribute", None))]
        consumers = [c for c in extra if callable(getattr(c, "on_evaluation_end", None))] + progress + [recorder]
        evaluation = ScheduledEvaluation(contributors, consumers)
        callbacks = [evaluation, StopState(), *dict.fromkeys(contributors + extra), recorder, *progress]
        # one rolling file, checkpoints/last.ckpt, in place of Lightning's default ModelCheckpoint
        minutes = run.checkpoint_minutes if run.checkpoint_every > 0 else 0.0
        callbacks.append(ResumeCheckpoint(every_n_epochs=run.checkpoint_every, every_minutes=minutes))
        kwargs["enable_checkpointing"] = True
        try:
            trainer = super().instantiate_trainer(callbacks=callbacks, **kwargs)
        except (ValueError, MisconfigurationException) as err:  # Trainer's own argument checks
            lines = str(err).strip().splitlines() or [type(err).__name__]
            raise ConfigError(f"trainer: {lines[0]}") from None
        if trainer.num_devices * trainer.num_nodes > 1:
            # evaluation, diagnostics and records are written by one process; these models are small
            # enough that parallel runs (a sweep's workers) use devices better than one split run
            raise ConfigError(f"trainer.devices={trainer.num_devices} x num_nodes={trainer.num_nodes}: one device "
                              "per run; run several runs in parallel with `grok-lightning sweep run` instead")
        return trainer


def check_fits_in_memory(config: dict) -> None:
    """Refuse, in one line naming the field, a transformer whose training would not fit in this
    machine's memory (before anything is built: a 10^6-wide or 10^5-deep model would otherwise
    ask the allocator for terabytes, or spend minutes building layers)."""
    import os

    from grok_lightning.models.transformer import transformer_size

    model = (config.get("model") or {}).get("init_args") or {}
    data = (config.get("data") or {}).get("init_args") or {}
    if model.get("arch", "transformer") != "transformer" or "d_model" not in model:
        return
    shape = {k: model.get(k) for k in ("d_model", "n_layers", "d_ff")}
    if not all(isinstance(v, int) and v >= 1 for v in shape.values()):
        return  # the module's own checks name the bad value
    p = data.get("p", 97) if isinstance(data.get("p", 97), int) else 97
    params, needed = transformer_size(p + 1, p, batch_size=data.get("batch_size", 512) or 512, **shape)
    try:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    if needed > available:
        field = max(shape, key=lambda k: shape[k] / {"d_model": 128, "n_layers": 4, "d_ff": 512}[k])
        raise ConfigError(f"model.{field}={shape[field]}: the model would have {params:.3g} parameters and need "
                          f"~{needed / 2**30:,.0f} GiB to train, more than this machine's {available / 2**30:,.0f} GiB")


def check_output_folders(config: dict) -> None:
    """The folders a run writes to (each logger's ``save_dir``, the record's folder) are folders or
    can be made: a file on the way is one line naming the field, before anything is built (the OS
    would say "Not a directory" about a path, at the first write)."""
    from pathlib import Path

    loggers = (config.get("trainer") or {}).get("logger")
    wanted = {}
    for i, spec in enumerate(loggers if isinstance(loggers, list) else [loggers]):
        save_dir = ((spec.get("init_args") or {}).get("save_dir")) if isinstance(spec, dict) else None
        if save_dir:
            wanted["trainer.logger" + (f".{i}" if isinstance(loggers, list) else "") + ".init_args.save_dir"] = save_dir
    record_path = (config.get("run") or {}).get("record_path")
    if record_path:
        wanted["run.record_path"] = str(Path(record_path).parent)
        require(not Path(record_path).is_dir(), "run.record_path", record_path, "is a folder; give the record's file name")
    for field, folder in wanted.items():
        for path in (Path(folder), *Path(folder).parents):
            if path.exists():
                require(path.is_dir(), field, folder, f"{path} is a file, not a folder")
                break


def resume_latest(trainer) -> str | None:
    """Point the trainer's logger at the latest run folder of its ``<save_dir>/<name>`` that has a
    ``checkpoints/last.ckpt`` (or at its given version) and return that checkpoint; ``None``
    (a new run, said in one line) when there is none. The caller says which one it continues,
    after checking it."""
    from pathlib import Path

    logger = trainer.logger
    if logger is None or not hasattr(logger, "root_dir"):
        raise ConfigError("run.resume: needs a logger with run folders (TensorBoardLogger or CSVLogger)")
    given = getattr(logger, "_version", None)
    root = Path(logger.root_dir)
    if given is not None:
        folders = [root / (given if isinstance(given, str) else f"version_{given}")]
    else:
        numbered = [(int(p.name.split("_")[1]), p) for p in root.glob("version_*") if p.name.split("_")[1].isdigit()]
        folders = [p for _, p in sorted(numbered, reverse=True)]
    for folder in folders:
        ckpt = folder / "checkpoints" / "last.ckpt"
        if ckpt.is_file():
            name = folder.name
            logger._version = int(name.split("_")[1]) if given is None else given
            return str(ckpt)
    logging.getLogger("lightning.pytorch").info(f"run.resume: no checkpoints/last.ckpt under {root}: a new run")
    return None


def stopped_by(trainer) -> int | None:
    """The signal that stopped this trainer's run gracefully (``ResumeCheckpoint``), if any."""
    return next((c.stopped_by for c in trainer.callbacks if isinstance(c, ResumeCheckpoint) and c.stopped_by), None)


def run_config(config: dict, ckpt_path: str | None = None, trusted_code=None) -> dict:
    """Train one run from a resolved LightningCLI config dict; return its record.

    ``config`` has the sections of a ``configs/*.yaml`` file (``model``, ``data``, ``trainer``,
    ``run``, ``grok``, ``seed_everything``). ``ckpt_path`` resumes from a checkpoint.
    ``trusted_code``: modules besides this package, Lightning and torch whose classes and callables
    the config may name (``--trust-code``; ``None`` keeps this process's setting).
    """
    if trusted_code is not None:
        trust_code(trusted_code)
    with warnings.catch_warnings():  # "args and sys.argv both given": args is what we mean here
        warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
        cli = GrokCLI(args=config, run=False, parser_kwargs={"exit_on_error": False})
    quiet_third_party()  # again: the catch_warnings block above dropped its warning filter
    try:
        cli.check_resume(ckpt_path)
        trainer_call(cli.trainer.fit, cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    finally:
        torch.set_flush_denormal(False)  # process-global state: do not leak it to the caller
        torch.set_float32_matmul_precision("highest")
    recorder = next(c for c in cli.trainer.callbacks if isinstance(c, RunRecorder))
    return recorder.record
