"""The repository as a newcomer meets it: entry points, one-way imports, files a person can read,
data that ships with the clone."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "grok_lightning"
MAX_LINES = 500


# --- entry points ---------------------------------------------------------------------------------
def test_python_m_grok_lightning_help_lists_every_verb_with_one_line():
    result = subprocess.run([sys.executable, "-m", "grok_lightning", "--help"], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for verb in ("fit", "sweep", "analyze"):
        rows = [line for line in lines if line.strip().startswith(f"{verb} ")]
        assert len(rows) == 1 and len(rows[0].split(None, 1)[1]) > 10, f"{verb}: {rows}"
    assert any(line.startswith("validate, test, predict") for line in lines)


def test_unsupported_lightning_verb_is_one_line(capsys):
    from grok_lightning.cli import main

    assert main(["validate", "--config", "configs/canonical.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: validate:")


# --- one-way imports ------------------------------------------------------------------------------
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The package modules that ``path`` imports, at any depth of the file (a function-level import
    is still a dependency). ``from a.b import c`` counts ``a.b.c`` when that is a module, else ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # a.b.func -> a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(folders: tuple[str, ...] = ("grok_lightning",)) -> dict[str, set[str]]:
    files = {_module_name(p): p for folder in folders for p in (REPO / folder).rglob("*.py")}
    return {name: _imports(path, name, set(files)) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of module-level dependencies, or None. A package's ``__init__`` re-exporting its
    submodules is not a cycle with them (``a`` -> ``a.b`` -> ``a`` through ``from a import x``
    is how Python packages work), so edges from a package to its own submodules are left out."""
    def edges(name):
        return {t for t in graph[name] if not t.startswith(name + ".")}

    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(name) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for target in sorted(edges(name)):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"p": {"p.x"}, "p.x": {"p"}}) is None  # a package re-exporting its module
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_grok_lightning_imports_have_no_cycle():
    graph = import_graph()
    assert "grok_lightning.sweep.worker" in graph and graph["grok_lightning.sweep.worker"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_repository_imports_have_no_cycle():
    graph = import_graph(("grok_lightning", "reproduce"))
    assert "reproduce.targets.all" in graph and graph["reproduce.targets.all"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


#: the floors of the repository, lowest first: a module imports from its own part or from a lower
#: floor, never from a higher one (nor from another part of its own floor)
FLOORS = [
    ["grok_lightning", "grok_lightning.config"],
    ["grok_lightning.records", "grok_lightning.package_data"],
    ["grok_lightning.metrics", "grok_lightning.models", "grok_lightning.data", "grok_lightning.checkpoint_io"],
    ["grok_lightning.stats", "grok_lightning.diagnostics"],
    ["grok_lightning.plots", "grok_lightning.callbacks", "grok_lightning.modules"],
    ["grok_lightning.run"],
    ["grok_lightning.ensembles"],
    ["grok_lightning.sweep"],
    ["grok_lightning.cli"],
    ["grok_lightning.__main__", "reproduce", "reproduce.manifest", "reproduce.tally"],
    ["reproduce.targets.shared"],  # the registry, the targets' command line and sweep readers, measured costs
    ["reproduce.report"],  # claims -> rows -> verdict -> REPORT.md, and the generated blocks of the docs
    ["reproduce.targets"],  # one module per figure or study
    ["reproduce.plan", "reproduce.__main__"],
    ["reproduce.pilots"],  # one-off studies: they may use the targets, no target uses them
]

#: the modules of reproduce/targets/ that the report and the planner read too: they import no target
#: and nothing of the report
TARGETS_SHARED = ("reproduce.targets.registry", "reproduce.targets.common", "reproduce.targets.costs")


def _part(module: str) -> str:
    """The floor entry a module belongs to: its package (or top-level module) under grok_lightning
    or reproduce; the targets' shared modules are a part of their own."""
    return "reproduce.targets.shared" if module in TARGETS_SHARED else ".".join(module.split(".")[:2])


def test_imports_go_down_the_floors_only():
    """reproduce imports grok_lightning and never the reverse; in reproduce, pilots -> plan ->
    targets -> report -> the targets' registry, command line and costs -> manifest/tally, so no
    target imports a pilot and the report never a target; inside the package, cli -> sweep ->
    ensembles -> run -> callbacks/modules/plots -> stats/diagnostics -> metrics/models/data ->
    records -> config."""
    floor = {part: level for level, parts in enumerate(FLOORS) for part in parts}
    graph = import_graph(("grok_lightning", "reproduce"))
    unplaced = sorted({_part(name) for name in graph} - set(floor))
    assert not unplaced, f"not on any floor of FLOORS: {unplaced}"
    upward = sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                    if _part(target) != _part(name) and floor[_part(target)] >= floor[_part(name)])
    assert not upward, "imports that do not go down a floor:\n" + "\n".join(upward)


def test_no_private_name_is_imported_from_another_module():
    """A helper used by another module is public (named without a leading underscore)."""
    found = []
    for folder in ("grok_lightning", "reproduce"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ImportFrom):
                    found += [f"{path.relative_to(REPO)}: {node.module}.{alias.name}" for alias in node.names
                              if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, "\n".join(found)


def test_a_broken_import_fails_loudly_instead_of_removing_a_verb():
    code = ("import sys; sys.modules['grok_lightning.sweep.cli'] = None\n"  # makes `import grok_lightning.sweep.cli` fail
            "from grok_lightning.cli import main\nmain(['--help'])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode != 0 and "grok_lightning.sweep.cli" in result.stderr.splitlines()[-1], result.stderr[-2000:]


def test_stats_and_plots_import_no_callback():
    """Statistics and figures are functions of records: they never reach into training code."""
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith(("grok_lightning.stats", "grok_lightning.plots")):
            bad = sorted(t for t in targets if t.startswith(("grok_lightning.callbacks", "grok_lightning.modules",
                                                             "grok_lightning.run", "lightning")))
            assert not bad, f"{name} imports {bad}"


# --- files a person can read ----------------------------------------------------------------------
@pytest.mark.parametrize("folder", ["grok_lightning", "reproduce"])
def test_no_source_file_is_over_500_lines(folder):
    long = {str(p.relative_to(REPO)): n for p in sorted((REPO / folder).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


# --- data that ships with the clone ---------------------------------------------------------------
def test_reference_data_ships_with_its_licence_note():
    reference = REPO / "reference"
    names = {p.name for p in reference.glob("*.json")}
    assert {"a5_wdc_fit.json", "a5_nu_jackknife.json", "intervention_stats.json", "a3_perm_test.json",
            "a7_cohens_d.json", "c1_empirical_validation.json"} <= names
    readme = (reference / "README.md").read_text()
    assert "CC-BY-4.0" in readme and "lucky-verma/grokking-diagnostics" in readme
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_every_smoke_caption_says_what_it_can_show_and_what_needs_a_longer_profile():
    """Every caption a target draws names its registry entry (``figure=``), so that under the smoke
    profile it ends with the entry's smoke scope; every scope of the registry is used."""
    from reproduce.targets.common import caption
    from reproduce.targets.registry import TARGETS, smoke_scope

    named = set()
    for path in sorted((REPO / "reproduce" / "targets").glob("*.py")):
        if path.name == "common.py":  # where caption() itself is defined
            continue
        text = path.read_text()
        calls = len(re.findall(r"\bcaption\(", text))
        named |= set(re.findall(r'figure="([\w-]+)"', text)) | set(re.findall(r'smoke_scope\(\w+, "([\w-]+)"\)', text))
        assert calls == len(re.findall(r'figure=("[\w-]+"|None)', text)), f"{path.name}: a caption without figure="
    scoped = {entry.name for t in TARGETS for entry in (t, *t.figures) if entry.smoke is not None}
    assert named == scoped
    assert smoke_scope("fig2").needs in caption("smoke", "x", figure="fig2")
    assert smoke_scope("lockin-fig3") == smoke_scope("lockin")  # a figure without its own has its target's
    assert "needs a longer profile" not in caption("medium", "x", figure="fig2")
