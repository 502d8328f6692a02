"""The Makefile's ``reproduce-*`` rules, written from the registry (:mod:`reproduce.targets.registry`).

    python -m reproduce makefile             # print the block
    python -m reproduce makefile --write     # replace it in the Makefile, between its two marker lines

Each target with ``make`` and each figure gets ``reproduce-<name>: install ## <help> (PROFILE=...)``
and runs ``python -m reproduce <name>`` with the profile, the output folder and the launch flags
(``$(LAUNCH)``); a target with an ``extra`` installs it first. ``tests/test_targets.py`` fails
when the Makefile's block is not this one.
"""

from __future__ import annotations

from pathlib import Path

from reproduce.targets.registry import TARGETS, Figure, Target

__all__ = ["BEGIN", "END", "block", "current", "make_names", "write"]

#: the first and last line of the block (the first continues with how it is written)
BEGIN, END = "# >>> reproduce targets", "# <<< reproduce targets"


def _rule(name: str, help_text: str, profiles: tuple[str, ...], extra: str | None) -> list[str]:
    line = f"{help_text} (PROFILE={'|'.join(profiles)})".replace("$", "$$")
    install = [f'\t$(PY) -m pip install -q -e ".[{extra}]"'] if extra else []
    return [f"reproduce-{name}: install ## {line}", *install,
            f"\t$(PY) -m reproduce {name} --profile $(PROFILE) --out $(OUT) $(LAUNCH)", ""]


def _entries(targets: tuple[Target, ...]) -> list[tuple[Target, Target | Figure]]:
    return [(t, entry) for t in targets for entry in ((t,) if t.make else ()) + t.figures]


def make_names(targets: tuple[Target, ...] = TARGETS) -> list[str]:
    """Every ``reproduce-*`` make target the registry gives, in its order."""
    return [f"reproduce-{entry.name}" for _, entry in _entries(targets)]


def block(targets: tuple[Target, ...] = TARGETS) -> str:
    """The Makefile's rules for the registry's targets and figures, between the marker lines."""
    lines = [f"{BEGIN}: written by `python -m reproduce makefile --write` from the registry; do not edit",
             f".PHONY: {' '.join(make_names(targets))}"]
    for target, entry in _entries(targets):
        lines += _rule(entry.name, entry.help, target.profiles, target.extra)
    return "\n".join(lines + [END]) + "\n"


def current(makefile: Path) -> str:
    """The block as it stands in ``makefile``, its marker lines included."""
    lines = Path(makefile).read_text().splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(BEGIN)]
    ends = [i for i, line in enumerate(lines) if line.startswith(END)]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise SystemExit(f"{makefile}: needs one line starting '{BEGIN}', then one starting '{END}'")
    return "".join(lines[starts[0]:ends[0] + 1])


def write(makefile: Path, targets: tuple[Target, ...] = TARGETS) -> bool:
    """Replace the block between the marker lines of ``makefile``; ``True`` when it changed."""
    text = Path(makefile).read_text()
    new = text.replace(current(makefile), block(targets), 1)
    if new != text:
        Path(makefile).write_text(new)
    return new != text
