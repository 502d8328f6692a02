"""``grok-lightning`` entry point.

``fit`` / ``validate`` and the other LightningCLI subcommands go to :class:`GrokCLI`;
``sweep``, ``analyze`` and ``report`` are this package's own verbs. A configuration error is
printed as one line (``error: field=value: allowed values``) with exit status 2, before any
training starts.
"""

from __future__ import annotations

import sys

from grok_lightning.config import ConfigError

PACKAGE_VERBS = {}  # verb -> callable(argv) registered by the sweep/analyze/report modules


def _package_verbs() -> dict:
    verbs = dict(PACKAGE_VERBS)
    try:
        from grok_lightning.stats.cli import main as analyze_main

        verbs["analyze"] = analyze_main
    except ImportError:
        pass
    try:
        from grok_lightning.sweep.cli import main as sweep_main

        verbs["sweep"] = sweep_main
    except ImportError:
        pass
    return verbs


def main(argv: list[str] | None = None) -> int:
    from_shell = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    verbs = _package_verbs()
    try:
        if argv and argv[0] in verbs:
            return int(verbs[argv[0]](argv[1:]) or 0)
        from grok_lightning.run import GrokCLI

        GrokCLI() if from_shell else GrokCLI(args=argv)
        return 0
    except Exception as err:  # jsonargparse wraps our ConfigError while instantiating classes
        config_error = _find_config_error(err)
        if config_error is None:
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
