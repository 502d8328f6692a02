"""``grok-lightning`` entry point (also ``python -m grok_lightning``).

``fit`` / ``validate`` and the other LightningCLI subcommands go to :class:`GrokCLI`;
``sweep`` and ``analyze`` are this package's own verbs. ``grok-lightning --help`` lists them all. A configuration error is
printed as one line (``error: field=value: allowed values``) with exit status 2, before any
training starts. That includes the parser's own errors (unknown key, wrong type, a missing or
malformed config file), which jsonargparse would print after its full usage text: the line names
the key or file and what was expected, with a pointer to ``--help``.
"""

from __future__ import annotations

import sys
import warnings

from grok_lightning.config import ConfigError
from grok_lightning.package_data import resolve_config_args
from grok_lightning.stats.cli import main as analyze_main
from grok_lightning.sweep.cli import main as sweep_main

PACKAGE_VERBS = {}  # verb -> callable(argv), for verbs added from outside this module
SUBCOMMANDS = ("fit", "validate", "test", "predict")
#: one line per verb for ``grok-lightning --help`` (LightningCLI's own help lists only its four)
VERB_HELP = {
    "fit": "train one run from a config (a file, or a packaged one by name: canonical, smoke, tian): TensorBoard "
           "logs + record.json",
    "demo": "a first run: the canonical recipe on the smoke-sized model groks in minutes on a laptop (fit's options "
            "apply, e.g. --trainer.max_epochs 20); prints where to look",
    "sweep": "run / resume a sweep file (progress in epochs, ETA), show its status, collect its records",
    "analyze": "statistics from run records: critical-wd (lambda_c), power-law (nu), paired comparisons",
}
#: LightningCLI's other verbs: the modules have no validation/test/predict step (evaluation runs
#: inside ``fit``, on the full splits, on the --model.eval_every schedule), so they are refused
#: with one line instead of a Lightning traceback
UNSUPPORTED = ("validate", "test", "predict")


def _package_verbs() -> dict:
    return {**PACKAGE_VERBS, "analyze": analyze_main, "sweep": sweep_main}


TRUST_FLAG = "--trust-code"


def take_trust_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(argv without --trust-code MODULE, the modules)``: the command line's own way to let
    configs name a user's code (files never can).

    >>> take_trust_flags(["fit", "--trust-code", "mypkg", "--trust-code=other.cbs", "--config", "c.yaml"])
    (['fit', '--config', 'c.yaml'], ['mypkg', 'other.cbs'])
    """
    rest, modules = [], []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == TRUST_FLAG:
            if i + 1 >= len(argv):
                raise ConfigError(f"{TRUST_FLAG}: expected a module name (e.g. {TRUST_FLAG} mypkg)")
            modules.append(argv[i + 1])
            i += 2
            continue
        if arg.startswith(TRUST_FLAG + "="):
            modules.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
        i += 1
    return rest, modules


def check_config_files(argv: list[str]) -> None:
    """Every ``--config FILE`` exists and holds a YAML mapping whose classes come from trusted
    packages (else one line naming the file).

    Values that are inline configs (``--config '{trainer: {max_epochs: 5}}'``) are left to the
    parser."""
    from grok_lightning.config import check_class_paths, read_yaml

    for i, arg in enumerate(argv):
        if arg in ("-c", "--config") and i + 1 < len(argv):
            path = argv[i + 1]
        elif arg.startswith("--config="):
            path = arg.split("=", 1)[1]
        else:
            continue
        if path.lstrip().startswith(("{", "[")) or "\n" in path:
            continue
        data = read_yaml(path, "--config")
        if not isinstance(data, dict):
            found = "an empty file" if data is None else f"a YAML {type(data).__name__}"
            raise ConfigError(f"--config {path}: {found}; expected a mapping of keys (model:, data:, trainer:, ...)")
        check_class_paths(data, f"--config {path}")


def _run_lightning(argv: list[str], from_shell: bool) -> None:
    from jsonargparse import ArgumentError

    from grok_lightning.run import GrokCLI

    resolved = resolve_config_args(argv)  # --config canonical: the packaged configs/canonical.yaml
    if resolved != argv:
        argv, from_shell = resolved, False
    check_config_files(argv)
    kwargs = {"parser_kwargs": {"exit_on_error": False}}  # errors come back here, not as usage text
    try:
        with warnings.catch_warnings():  # "args and sys.argv both given": args is sys.argv, rewritten (--resume)
            warnings.filterwarnings("ignore", message=".*LightningCLI's args parameter.*")
            GrokCLI(**kwargs) if from_shell else GrokCLI(args=argv, **kwargs)
    except ArgumentError as err:
        from grok_lightning.config import parser_error_line

        command = f"grok-lightning {argv[0]}" if argv and argv[0] in SUBCOMMANDS else "grok-lightning"
        raise ConfigError(f"{parser_error_line(str(err))} (see: {command} --help)") from None


def usage(verbs: dict) -> str:
    """The top-level help: every verb with one line."""
    names = ["fit", "demo", *sorted(v for v in verbs if v not in ("fit", "demo"))]
    width = max(len(n) for n in names) + 2
    lines = ["usage: grok-lightning VERB [options]      (python -m grok_lightning VERB ...)", "",
             "Reproduction of arXiv 2605.20441 (grokking, weight-decay regimes, attention diagnostics) and",
             "arXiv 2605.08119 (spectral lock-in) with PyTorch Lightning.", "", "verbs:"]
    lines += [f"  {name:<{width}}{VERB_HELP.get(name, '')}" for name in names]
    lines += ["", f"{', '.join(UNSUPPORTED)}: LightningCLI verbs these modules do not implement (evaluation runs",
              "inside fit, on the full splits); they are refused with one line.", "", "`grok-lightning VERB --help` gives the options of one verb, e.g.",
              "  grok-lightning fit --config canonical --print_config",
              "  grok-lightning sweep run canonical_wd --profile smoke --dry-run"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from_shell = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    verbs = _package_verbs()
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(verbs), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] in UNSUPPORTED:
        print(f"error: {argv[0]}: not implemented by these modules (evaluation runs inside fit, on the full "
              f"splits; read record.json or TensorBoard); expected one of: {', '.join(VERB_HELP)}", file=sys.stderr)
        return 2
    if argv[0] == "demo":  # what `make demo` runs, from the packaged configs
        argv, from_shell = ["fit", "--config", "canonical", "--config", "smoke", *argv[1:]], False
    if argv[0] == "fit" and "--resume" in argv:  # sugar for --run.resume true
        argv = [a for a in argv if a != "--resume"] + ["--run.resume", "true"]
        from_shell = False
    try:
        if argv[0] in SUBCOMMANDS and any(a == TRUST_FLAG or a.startswith(TRUST_FLAG + "=") for a in argv):
            from grok_lightning.config import trust_code

            argv, modules = take_trust_flags(argv)
            trust_code(modules)
            from_shell = False
        if argv[0] in verbs:
            return int(verbs[argv[0]](argv[1:]) or 0)
        _run_lightning(argv, from_shell)
        return 0
    except Exception as err:  # jsonargparse wraps our ConfigError while instantiating classes
        config_error = _find_config_error(err)
        if config_error is None:
            if isinstance(err, OSError):  # read-only output, a full disk, a file where a folder should be
                print(f"error: {f'{err.filename}: ' if err.filename else ''}{err.strerror or err}", file=sys.stderr)
                return 2
            raise
        print(f"error: {config_error}", file=sys.stderr)
        return 2


def _find_config_error(err: BaseException | None) -> ConfigError | None:
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, ConfigError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


if __name__ == "__main__":
    sys.exit(main())
