"""The registry of reproduction targets is the one list: the Makefile's rules, `python -m reproduce`,
reproduce-all's order and the smoke captions come from it, and it names what the targets really use."""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest
import yaml

from reproduce.targets import make, registry
from reproduce.targets.registry import MEDIUM_ORDER, TARGETS, Figure, MediumAbsence, SmokeScope, Sweep, Target

REPO = Path(__file__).resolve().parents[1]
TARGETS_DIR = REPO / "reproduce" / "targets"
SWEEPS = REPO / "configs" / "sweeps"


def _rules(makefile_text: str) -> dict[str, str]:
    """``{make target: its help text}`` of every rule with a ``##`` help line."""
    return dict(re.findall(r"^([a-zA-Z0-9_%-]+):.*?## (.*)$", makefile_text, re.M))


def test_the_makefile_rules_are_the_registry_s():
    """A registry entry without its make rule, a rule without its entry, or a changed help line fails
    here: `python -m reproduce makefile --write` writes the block again."""
    assert make.current(REPO / "Makefile") == make.block(), "stale Makefile: run `python -m reproduce makefile --write`"
    rules = _rules((REPO / "Makefile").read_text())
    reproduce_rules = {name for name in rules if name.startswith("reproduce-")}
    assert reproduce_rules == set(make.make_names()) | {"reproduce-all"}
    for target in TARGETS:
        for entry in ((target,) if target.make else ()) + target.figures:
            assert rules[f"reproduce-{entry.name}"] == f"{entry.help} (PROFILE={'|'.join(target.profiles)})"


def test_the_makefile_block_is_rewritten_in_place(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"top:\n\techo top\n{make.BEGIN}\nold: ## stale\n{make.END}\nbottom:\n\techo bottom\n")
    assert make.write(makefile) and not make.write(makefile)
    text = makefile.read_text()
    assert text.startswith("top:\n") and text.endswith("bottom:\n\techo bottom\n") and "old:" not in text
    assert make.current(makefile) == make.block()
    rllc = text.split("reproduce-rllc:", 1)[1].split("\n\n", 1)[0]
    assert '-m pip install -q -e ".[llc]"' in rllc  # a target's extra is installed first
    makefile.write_text("no markers\n")
    with pytest.raises(SystemExit, match="needs one line"):
        make.write(makefile)


def test_every_target_and_figure_runs_by_name(monkeypatch):
    """`python -m reproduce NAME` calls the target's main, a figure with its --only part."""
    import reproduce.__main__ as entry

    calls = []
    monkeypatch.setattr(entry.importlib, "import_module",
                        lambda module: types.SimpleNamespace(main=lambda argv: calls.append((module, argv))))
    for target in TARGETS:
        for figure in (None, *target.figures):
            entry.run(figure.name if figure else target.name, ["--profile", "smoke"])
            only = ["--only", figure.part] if figure else []
            assert calls.pop() == (target.module, only + ["--profile", "smoke"])
    with pytest.raises(SystemExit, match="neither a target nor a figure"):
        entry.run("fig99", [])


def test_every_target_module_has_main_and_accepts_its_figures_parts():
    for target in TARGETS:
        module = importlib.import_module(target.module)
        assert callable(module.main), target.name
        if target.figures:
            parts = module.PARTS
            assert {figure.part for figure in target.figures} <= set(parts), target.name


def _sources(target: Target) -> str:
    """The text of a target's module and of the reproduce.targets modules it imports."""
    path = TARGETS_DIR / f"{target.name}.py"
    texts = [path.read_text()]
    for node in ast.walk(ast.parse(texts[0])):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reproduce.targets."):
            helper = TARGETS_DIR / f"{node.module.rsplit('.', 1)[1]}.py"
            if helper.name not in ("common.py", "registry.py", "costs.py"):
                texts.append(helper.read_text())
    return "\n".join(texts)


def test_each_target_s_sweeps_are_the_files_it_reads():
    """Each registered sweep file exists with every profile it is listed under and is named in the
    target's code; every sweep file a target's code names is registered."""
    registered = set()
    for target in TARGETS:
        code = _sources(target)
        for sweep in target.sweeps:
            defined = yaml.safe_load((SWEEPS / sweep.file).read_text()).get("profiles") or {}
            assert set(sweep.profiles) <= set(defined), (target.name, sweep.file, sorted(defined))
            assert f'"{sweep.file}"' in code, (target.name, sweep.file)
            registered.add(sweep.file)
    named = {name for path in TARGETS_DIR.glob("*.py") for name in re.findall(r'"(\w+\.yaml)"', path.read_text())
             if (SWEEPS / name).is_file()}
    assert named == registered


def test_each_target_s_plots_exist_and_are_the_ones_it_draws():
    registered = set()
    for target in TARGETS:
        code = _sources(target)
        for name in target.plots + tuple(p for figure in target.figures for p in figure.plots):
            module, function = name.split(".")
            assert callable(getattr(importlib.import_module(f"grok_lightning.plots.{module}"), function)), name
            assert re.search(rf"\b{function}\(", code), (target.name, name)
            registered.add(name)
    drawn = set()
    for path in TARGETS_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grok_lightning.plots.") \
                    and node.module != "grok_lightning.plots.common":
                drawn |= {f"{node.module.rsplit('.', 1)[1]}.{alias.name}" for alias in node.names}
    assert drawn == registered


def test_the_orders_of_reproduce_all():
    assert registry.order("medium") == MEDIUM_ORDER
    smoke = registry.order("smoke")
    assert smoke == tuple(t.name for t in TARGETS) and registry.order("paper") == smoke
    # records a target reads without running their sweep: the target that runs it goes first (one
    # that shares a sweep, as fig1 shares fig5's, resumes it itself)
    for reader, sources in {"predict": ["fig1"], "rllc": ["long_horizon"], "fig10": ["fig9"]}.items():
        assert all(smoke.index(source) < smoke.index(reader) for source in sources), reader
    assert all(MEDIUM_ORDER.index(source) < MEDIUM_ORDER.index("predict") for source in ("fig5", "fig4", "fig8"))


def test_the_medium_pass_says_why_it_leaves_a_target_out():
    from reproduce.targets.costs import medium_left_out

    reasons = medium_left_out()
    assert tuple(reasons) == registry.MEDIUM_LEFT_OUT
    assert set(reasons) == {t.name for t in TARGETS} - set(MEDIUM_ORDER)
    assert reasons["canonical"] == "the single canonical run is part of Fig. 2's medium runs"
    assert reasons["fig9"].endswith("(a smoke-sized medium profile exists: make reproduce-fig9 PROFILE=medium)")


def test_a_bad_registry_entry_is_one_clear_error():
    scope = SmokeScope("x", "y")
    with pytest.raises(ValueError, match="Target.name='Fig 5'"):
        Target("Fig 5", "help", (), (), scope)
    with pytest.raises(ValueError, match="not one of"):
        Target("all", "help", (), (), scope)
    with pytest.raises(ValueError, match="help: one line, without the profiles"):
        Target("figx", "help (PROFILE=smoke)", (), (), scope)
    with pytest.raises(ValueError, match="Sweep.file='sweeps/a.yaml'"):
        Sweep("sweeps/a.yaml")
    with pytest.raises(ValueError, match=r"Sweep\(a.yaml\).profiles"):
        Sweep("a.yaml", ("long",))
    with pytest.raises(ValueError, match="a.yaml under profiles"):
        Target("figx", "help", (Sweep("a.yaml", ("medium",)),), (), scope, profiles=("smoke",))
    with pytest.raises(ValueError, match="make cannot run it"):
        Target("figx", "help", (), (), scope, make=False)
    assert Target("figx", "help", (), (), scope, figures=(Figure("figy", "y", "help", ()),), make=False,
                  medium=MediumAbsence("why")).module == "reproduce.targets.figx"


def test_no_target_imports_a_pilot():
    """Pilots are one-off studies that may use the targets; a target never depends on one."""
    found = []
    for path in sorted(TARGETS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}: {name}" for name in names if name.startswith("reproduce.pilots")]
    assert not found, found


def test_the_listing_names_every_target_and_figure():
    import reproduce.__main__ as entry

    text = entry.listing()
    for target in TARGETS:
        assert text.count(f"{target.name} ") >= 1 and all(f"{f.name}: " in text for f in target.figures)


def test_the_canonical_target_reads_records_only_under_no_train(tmp_path):
    from reproduce.targets import canonical

    with pytest.raises(SystemExit, match=r"canonical \(smoke\): no final record .*--no-train: nothing trained"):
        canonical.main(["--out", str(tmp_path), "--no-train"])
    assert not list(tmp_path.rglob("record.json"))
