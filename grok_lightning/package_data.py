"""Files that ship inside the package: the run and sweep configs, and the paper's reference data.

In a clone, ``grok_lightning/configs`` and ``grok_lightning/reference`` are links to the
repository's ``configs/`` and ``reference/`` (the files people edit and the docs name); a wheel
carries copies of them. Either way the package reads them through :mod:`importlib.resources`,
never through a path of the repository, so an installed copy works from any folder:
``grok-lightning fit --config canonical`` names a packaged config, a path still names a file.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from grok_lightning.config import ConfigError

__all__ = ["config_file", "config_names", "package_root", "reference_file", "resolve_config_args", "sweep_file"]


def package_root() -> Path:
    """The installed package's folder (a wheel is always installed as files, never zipped)."""
    root = files("grok_lightning")
    if not isinstance(root, Path):
        raise RuntimeError(f"grok_lightning is imported from {root}: its configs need the package installed as files")
    return root


def reference_file(name: str) -> Path:
    """A file of the paper's reference data (``reference/<name>``: CC-BY-4.0, see its README.md).

    >>> reference_file("fig2_median_read_off.csv").is_file()
    True
    """
    path = package_root() / "reference" / name
    if not path.is_file():
        raise FileNotFoundError(f"reference data {name!r} is not in the package ({path})")
    return path


def config_names(folder: str = "") -> list[str]:
    """The packaged configs of ``folder`` (``""``, ``sweeps`` or ``interventions``), by name.

    >>> {"canonical", "smoke", "tian"} <= set(config_names()), "canonical_wd" in config_names("sweeps")
    (True, True)
    """
    return sorted(p.stem for p in (package_root() / "configs" / folder).glob("*.yaml"))


def config_file(name: str, folder: str = "") -> Path | None:
    """The packaged config that ``name`` stands for, or None: ``canonical``, ``canonical.yaml`` and
    ``configs/canonical.yaml`` all name ``configs/canonical.yaml`` (``folder="sweeps"``: a sweep file).

    >>> config_file("canonical").name, config_file("configs/sweeps/e12.yaml", "sweeps").name, config_file("nope")
    ('canonical.yaml', 'e12.yaml', None)
    """
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts:
        return None
    if relative.parts[:1] == ("configs",):
        relative = Path(*relative.parts[1:]) if len(relative.parts) > 1 else Path()
    if folder and relative.parts[:1] == (folder,):
        relative = Path(*relative.parts[1:]) if len(relative.parts) > 1 else Path()
    if not relative.name or len(relative.parts) != 1:
        return None
    path = package_root() / "configs" / folder / relative.with_suffix(".yaml").name
    return path if relative.suffix in ("", ".yaml") and path.is_file() else None


def sweep_file(name: str) -> str:
    """``name`` when it is a file or a folder here, else the packaged sweep file it names (``canonical_wd``)
    when there is one, else ``name`` (the sweep loader then says what is missing)."""
    if Path(name).exists():
        return name
    packaged = config_file(name, "sweeps")
    return str(packaged) if packaged else name


def resolve_config_args(argv: list[str]) -> list[str]:
    """``argv`` with every ``--config NAME`` that is not a file here but names a packaged config
    (``canonical``, ``smoke``, ``tian``, ``interventions/head_reinit``) replaced by that file's path.

    A value that is neither a file nor a packaged config is an error naming both.
    """
    out = list(argv)
    for i, arg in enumerate(out):
        if arg in ("-c", "--config") and i + 1 < len(out):
            index, value, prefix = i + 1, out[i + 1], ""
        elif arg.startswith("--config="):
            index, value, prefix = i, arg.split("=", 1)[1], "--config="
        else:
            continue
        if value.lstrip().startswith(("{", "[")) or "\n" in value or Path(value).exists():
            continue  # an inline config, or a file
        folder = "interventions" if Path(value).parts[-2:-1] == ("interventions",) else ""
        packaged = config_file(value, folder)
        if packaged is None:
            raise ConfigError(f"--config {value}: no such file, and not a packaged config (packaged: "
                              f"{', '.join(config_names())}; interventions/: {', '.join(config_names('interventions'))})")
        out[index] = prefix + str(packaged)
    return out
