"""The campaign catalogue (``configs/campaigns.yaml``): which runs would decide which claims.

A campaign is a set of runs that share a configuration. Four forms:

* a **sweep campaign** names a sweep file, one of its profiles and the store the reproduce target
  reads (``store``, a folder under ``results/``), and either the runs it ``add``\\ s to that
  profile (``grid``: values appended to an axis of the profile; ``zip``: rows appended to the
  profile's zip group, the same keys) or nothing (the profile's runs as they are). Its runs are
  derived from the sweep file, so they are exactly the runs the target will read. It is run by
  ``python -m reproduce.plan run NAME``.
* a **stored campaign** (``stored: true``) models its runs by the sweep already stored in ``store``
  (its ``sweep.yaml``, written when that sweep started, whatever its sweep file says today), plus
  the values it ``add``\\ s to the stored grid; run the same way (a stored sweep without additions
  resumes in place).
* a **target campaign** (``command`` and ``groups``, nothing proposed) is trained by a reproduce
  target that derives its own runs (E12's groups start from the control runs' checkpoints), and is
  costed from ``groups`` as a proposed one.
* a **proposed campaign** (``proposed``: what must be built before it can run, ``command``: what
  will run it then) is costed from ``groups`` of runs: ``runs``, ``horizon``, ``start`` (the epoch
  it starts from: a record field read from a store, or an ``assume``\\ d epoch) and ``cost_like``
  (the store whose records say what an epoch of such a run costs).

Both say which claims of ``reference/claims.csv`` they ``feed`` and how many runs they add to each
claim's n (a claim id that is not in the table is an error). ``replaces: true`` says the campaign's
runs replace the target's current runs for those claims (a new store at a longer horizon), so n
starts from 0; ``after`` names campaigns it needs first (a claim pooled over both, a shared store).
``undecidable`` lists the claims no campaign can decide yet, with what they need.

``adopted``: whether the campaign's additions are already in the sweep file's profile. After a
campaign has run, its additions are moved into the profile (``python -m reproduce.plan adopt NAME``
prints the profile's new axes) and ``adopted`` is set: the reproduce targets read the sweep file,
so only adopted runs count. The loader checks that the flag says the truth.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from grok_lightning.config import ConfigError, read_yaml
from grok_lightning.sweep.grid import RunSpec, Sweep, expand, find_base, load_sweep, resolve_key
from reproduce.targets.common import REPO, sweep_path

__all__ = ["CATALOGUE", "Campaign", "Catalogue", "Group", "absolute_bases", "adopted_axes", "derived_sweep_data",
           "load_catalogue", "stored_sweep", "stored_sweep_files"]

CATALOGUE = REPO / "configs" / "campaigns.yaml"
CAMPAIGN_KEYS = {"sweep", "profile", "store", "add", "adopted", "epochs", "cost_like", "replaces", "after", "also",
                 "feeds", "proposed", "command", "groups", "stored"}
GROUP_KEYS = {"runs", "horizon", "start", "cost_like", "why"}
#: keys a stored campaign takes its values from the stored sweep instead
NOT_STORED = ("sweep", "profile", "adopted")
EPOCH_RULES = ("horizon", "like", "claim")


@dataclass(frozen=True)
class Group:
    """Runs costed without a sweep: ``runs`` runs of ``horizon`` epochs that start at ``start``
    (``{"store": ..., "field": ...}``: the median of that record field over the store's records, or
    ``{"assume": epoch, "why": ...}``), each epoch costing what one of ``cost_like``'s records did."""

    runs: int
    horizon: int
    cost_like: str
    start: dict | None = None
    why: str = ""


@dataclass(frozen=True)
class Campaign:
    name: str
    feeds: dict[str, int]
    sweep: str | None = None
    profile: str | None = None
    store: str | None = None
    stored: bool = False
    add: dict = field(default_factory=dict)
    adopted: bool = False
    epochs: dict | None = None
    cost_like: dict = field(default_factory=dict)
    replaces: bool = False
    after: tuple[str, ...] = ()
    also: tuple[Group, ...] = ()
    proposed: str | None = None
    command: str | None = None
    groups: tuple[Group, ...] = ()

    @property
    def runnable(self) -> bool:
        return self.proposed is None

    @property
    def by_sweep(self) -> bool:
        """Whether its runs are derived from a sweep (a sweep file's profile or a stored sweep) and
        trained by ``python -m reproduce.plan run``; else a target or a proposal trains them."""
        return self.runnable and (self.sweep is not None or self.stored)

    def run_command(self, plan_profile: str) -> str:
        """The one command that trains the campaign."""
        if self.command:
            return self.command
        return f"python -m reproduce.plan run {self.name} --profile {plan_profile}"

    def sweep_file(self) -> Path:
        return sweep_path(self.sweep)

    def runs(self) -> list[RunSpec]:
        """The campaign's runs, derived from its sweep file or stored sweep (module docstring); expanded
        once per campaign object (the cost model, the planner and the ledger each ask for them)."""
        return list(self._expanded)

    @cached_property
    def _expanded(self) -> tuple[RunSpec, ...]:
        return tuple(self._expand())

    def _expand(self) -> list[RunSpec]:
        if self.stored:
            added = expand(stored_sweep(self))
            if not self.add:
                return added
            before = {r.run_id for r in expand(stored_sweep(self, remove=True))}
            return [r for r in added if r.run_id not in before]
        original = load_sweep(self.sweep_file(), self.profile)
        if not self.add:
            return expand(original)
        if self.adopted:  # the profile holds them: they are what removing the additions takes away
            profile_runs = expand(original)
            kept = {r.run_id for r in expand(_sweep_of(derived_sweep_data(self, remove=True), self))}
            return [r for r in profile_runs if r.run_id not in kept]
        before = {r.run_id for r in expand(original)}
        return [r for r in expand(_sweep_of(derived_sweep_data(self), self)) if r.run_id not in before]


@dataclass(frozen=True)
class Catalogue:
    profile: str
    campaigns: dict[str, Campaign]
    undecidable: dict[str, str]

    def feeding(self, claim_id: str) -> list[str]:
        return [c.name for c in self.campaigns.values() if claim_id in c.feeds]


# --- a stored sweep with a campaign's additions ----------------------------------------------------
def stored_sweep(campaign: Campaign, remove: bool = False) -> Sweep:
    """The sweep stored in the campaign's store with its grid additions (``remove``: without
    them, whether or not the store holds them already); a missing store is one error line."""
    from grok_lightning.sweep.store import SweepStore

    root = REPO / campaign.store
    if not (root / "sweep.yaml").is_file():
        raise ConfigError(f"campaign {campaign.name}: {campaign.store} has no sweep.yaml (a stored campaign models "
                          "the sweep stored there: ship its sweep.yaml and plan.json)")
    sweep = SweepStore(root).load_sweep()
    grid = dict(sweep.grid)
    for key, values in (campaign.add.get("grid") or {}).items():
        name = _key_in(grid, key, f"campaign {campaign.name}: add.grid")
        kept = [v for v in grid[name] if v not in values]
        grid[name] = kept if remove else kept + list(values)
    return dataclasses.replace(sweep, grid=grid)


def stored_sweep_files(campaign: Campaign, folder: Path) -> tuple[Path, str]:
    """A sweep file (and its base config beside it) in ``folder`` that expands to the stored sweep
    with the campaign's additions, run for run (the same configs, hence the same run ids): what
    ``--extend`` adds to the store. Returns the file and the profile to run it with."""
    sweep = stored_sweep(campaign)
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / f"{campaign.name}.base.yaml"
    base.write_text(f"# the base config inlined in {campaign.store}/sweep.yaml\n" + yaml.safe_dump(sweep.base, sort_keys=False))
    data = {"name": sweep.name, "base": str(base.resolve()), "checkpoint_min_epochs": sweep.checkpoint_min_epochs,
            "checkpoint_every": sweep.checkpoint_every, "keep_checkpoints": sweep.keep_checkpoints,
            "overrides": sweep.overrides, "grid": sweep.grid, "zip": sweep.zips or None,
            "profiles": {sweep.profile: {}} if sweep.profile else None}
    path = folder / f"{campaign.name}.yaml"
    path.write_text(f"# {campaign.store}/sweep.yaml with campaign {campaign.name}'s runs added, written by python -m "
                    "reproduce.plan run\n" + yaml.safe_dump({k: v for k, v in data.items() if v is not None},
                                                             sort_keys=False))
    return path, sweep.profile


# --- the profile with a campaign's additions -------------------------------------------------------
def _effective_axes(data: dict, profile: str) -> tuple[dict, list]:
    """The profile's grid (top-level axes it does not null, then its own) and its zip groups."""
    prof = (data.get("profiles") or {}).get(profile) or {}
    grid = {**(data.get("grid") or {}), **(prof.get("grid") or {})}
    grid = {k: v for k, v in grid.items() if v is not None}
    zips = prof.get("zip") if prof.get("zip") is not None else data.get("zip")
    zips = [] if zips is None else (zips if isinstance(zips, list) else [zips])
    return grid, [{k: v for k, v in z.items() if v is not None} for z in zips]


def _key_in(axes: dict, key: str, where: str) -> str:
    """The spelling ``axes`` uses for ``key`` (``wd`` and ``model.init_args.weight_decay`` are one)."""
    wanted = resolve_key(key)
    for name in axes:
        if resolve_key(name) == wanted:
            return name
    raise ConfigError(f"{where}: {key!r} is not an axis of the profile (its axes: {', '.join(axes) or 'none'})")


def _remove_rows(group: dict, rows: list[tuple], where: str) -> dict:
    keys = list(group)
    table = [tuple(group[k][i] for k in keys) for i in range(len(group[keys[0]]))]
    for row in rows:
        if row not in table:
            raise ConfigError(f"{where}: adopted, but the profile has no zip row {dict(zip(keys, row))}")
        del table[len(table) - 1 - table[::-1].index(row)]
    return {k: [row[i] for row in table] for i, k in enumerate(keys)}


def derived_sweep_data(campaign: Campaign, remove: bool = False) -> dict:
    """The sweep file's data with the campaign's additions in its profile (``remove``: taken out,
    for an adopted campaign). Additions only extend axes the profile already has, so the profile's
    runs keep their ids and folder names."""
    where = f"campaign {campaign.name}"
    data = copy.deepcopy(read_yaml(campaign.sweep_file(), "sweep file"))
    profiles = data.setdefault("profiles", {}) or {}
    if campaign.profile not in profiles:
        raise ConfigError(f"{where}: {campaign.sweep} has no profile {campaign.profile!r}")
    prof = profiles[campaign.profile] = dict(profiles[campaign.profile] or {})
    grid, zips = _effective_axes(data, campaign.profile)
    for key, values in (campaign.add.get("grid") or {}).items():
        name = _key_in(grid, key, f"{where}: add.grid")
        if remove:
            missing = [v for v in values if v not in grid[name]]
            if missing:
                raise ConfigError(f"{where}: adopted, but the profile's {name} has no {missing}")
            new = [v for v in grid[name] if v not in values]
        else:
            new = list(grid[name]) + list(values)
        prof["grid"] = {**(prof.get("grid") or {}), name: new}
    zip_add = campaign.add.get("zip")
    if zip_add:
        if len(zips) != 1:
            raise ConfigError(f"{where}: add.zip needs a profile with one zip group ({campaign.sweep} "
                              f"{campaign.profile} has {len(zips)})")
        group = dict(zips[0])
        names = {_key_in(group, key, f"{where}: add.zip"): values for key, values in zip_add.items()}
        if set(names) != set(group):
            raise ConfigError(f"{where}: add.zip must give every key of the profile's zip ({', '.join(group)})")
        lengths = {len(v) for v in names.values()}
        if len(lengths) != 1:
            raise ConfigError(f"{where}: add.zip axes must have equal lengths")
        if remove:
            rows = list(zip(*(names[k] for k in group)))
            group = _remove_rows(group, rows, f"{where}: add.zip")
        else:
            group = {k: list(group[k]) + list(names[k]) for k in group}
        prof["zip"] = group
    return data


def _sweep_of(data: dict, campaign: Campaign) -> Sweep:
    """Load derived sweep data as :func:`load_sweep` loads a file: written to a temporary folder
    with its base configs resolved where the original file would find them."""
    import tempfile

    original = campaign.sweep_file()
    with tempfile.TemporaryDirectory(prefix="campaign-") as folder:
        path = Path(folder) / original.name
        path.write_text(yaml.safe_dump(absolute_bases(data, original), sort_keys=False))
        sweep = load_sweep(path, campaign.profile)
    sweep.source = str(original)
    return sweep


def absolute_bases(data: dict, original: Path) -> dict:
    """``data`` with every base config (top level and per profile) as the absolute path the
    original sweep file resolves it to."""
    data = copy.deepcopy(data)

    def resolved(base):
        names = base if isinstance(base, list) else [base]
        paths = [str(find_base(name, original)) for name in names]
        return paths if isinstance(base, list) else paths[0]

    data["base"] = resolved(data["base"])
    for prof in (data.get("profiles") or {}).values():
        if isinstance(prof, dict) and prof.get("base"):
            prof["base"] = resolved(prof["base"])
    return data


def adopted_axes(campaign: Campaign) -> str:
    """The YAML of the profile's axes with the campaign's additions: what adopting it writes into
    the sweep file's profile (then ``adopted: true`` in the catalogue)."""
    prof = derived_sweep_data(campaign)["profiles"][campaign.profile]
    block = {k: prof[k] for k in ("grid", "zip") if k in prof}
    return yaml.safe_dump(block, sort_keys=False, default_flow_style=None, width=110)


# --- loading ---------------------------------------------------------------------------------------
def _group(raw, where: str) -> Group:
    if not isinstance(raw, dict) or set(raw) - GROUP_KEYS or not {"runs", "horizon", "cost_like"} <= set(raw):
        raise ConfigError(f"{where}: a group needs runs, horizon and cost_like (and may give start, why)")
    if not isinstance(raw["runs"], int) or raw["runs"] < 1 or not isinstance(raw["horizon"], int):
        raise ConfigError(f"{where}: runs must be an integer >= 1 and horizon an integer")
    start = raw.get("start")
    if start is not None and not (isinstance(start, dict) and ({"store", "field"} <= set(start) or "assume" in start)):
        raise ConfigError(f"{where}.start: give {{store, field}} (read from records) or {{assume, why}}")
    return Group(runs=raw["runs"], horizon=raw["horizon"], cost_like=str(raw["cost_like"]), start=start,
                 why=str(raw.get("why", "")))


def _campaign(name: str, raw, claim_ids, where: str) -> Campaign:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a mapping")
    unknown = sorted(set(raw) - CAMPAIGN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(CAMPAIGN_KEYS))})")
    feeds = raw.get("feeds") or {}
    if not isinstance(feeds, dict):
        raise ConfigError(f"{where}.feeds: must map claim ids to the runs added to their n")
    for claim_id, added in feeds.items():
        if claim_id not in claim_ids:
            raise ConfigError(f"{where}.feeds: unknown claim id {claim_id!r} (not in reference/claims.csv)")
        if not isinstance(added, int) or isinstance(added, bool) or added < 1:
            raise ConfigError(f"{where}.feeds.{claim_id}: the runs added to its n must be an integer >= 1")
    epochs = raw.get("epochs")
    if epochs is not None and (not isinstance(epochs, dict) or len(epochs) != 1 or next(iter(epochs)) not in EPOCH_RULES):
        raise ConfigError(f"{where}.epochs: one of {{horizon: true}}, {{like: {{axis: value}}}}, {{claim: id}}")
    if epochs and "claim" in epochs and epochs["claim"] not in claim_ids:
        raise ConfigError(f"{where}.epochs: unknown claim id {epochs['claim']!r}")
    common = dict(name=name, feeds=dict(feeds), replaces=bool(raw.get("replaces", False)),
                  after=tuple(raw.get("after") or ()),
                  also=tuple(_group(g, f"{where}.also[{i}]") for i, g in enumerate(raw.get("also") or [])))
    groups = tuple(_group(g, f"{where}.groups[{i}]") for i, g in enumerate(raw.get("groups") or []))
    if raw.get("proposed"):
        if not raw.get("command") or not groups:
            raise ConfigError(f"{where}: a proposed campaign needs command and groups")
        return Campaign(proposed=str(raw["proposed"]), command=str(raw["command"]), groups=groups, **common)
    if groups and not raw.get("sweep") and not raw.get("stored"):
        if not raw.get("command"):
            raise ConfigError(f"{where}: a target campaign (groups without a sweep) needs the command that trains it")
        return Campaign(command=str(raw["command"]), groups=groups, **common)
    add = raw.get("add") or {}
    if set(add) - {"grid", "zip"}:
        raise ConfigError(f"{where}.add: only grid and zip")
    if raw.get("stored"):
        given = [key for key in NOT_STORED if key in raw]
        if given or not raw.get("store") or "zip" in add:
            raise ConfigError(f"{where}: a stored campaign gives its store and may add grid values; "
                              f"{', '.join(given) or 'zip'} come(s) from the stored sweep")
        return Campaign(stored=True, store=str(raw["store"]), add=dict(add), epochs=epochs,
                        cost_like=dict(raw.get("cost_like") or {}), **common)
    for key in ("sweep", "profile", "store"):
        if not raw.get(key):
            raise ConfigError(f"{where}: missing {key!r} (or give stored: true, or groups with a command)")
    return Campaign(sweep=str(raw["sweep"]), profile=str(raw["profile"]), store=str(raw["store"]), add=dict(add),
                    adopted=bool(raw.get("adopted", not add)), epochs=epochs, cost_like=dict(raw.get("cost_like") or {}),
                    command=raw.get("command"), **common)


def load_catalogue(profile: str, path: str | Path = CATALOGUE, claim_ids=None) -> Catalogue:
    """One profile's campaigns; a malformed entry or an unknown claim id is one ``ConfigError`` line."""
    from reproduce.report import load_claims

    claim_ids = set(load_claims()) if claim_ids is None else set(claim_ids)
    data = read_yaml(Path(path), "campaign catalogue")
    if not isinstance(data, dict) or profile not in data:
        have = ", ".join(data) if isinstance(data, dict) else "nothing"
        raise ConfigError(f"{path}: no campaigns for profile {profile!r} (it has: {have})")
    section = data[profile] or {}
    raw_campaigns = section.get("campaigns") or {}
    campaigns = {name: _campaign(str(name), raw, claim_ids, f"{Path(path).name}: {profile}.campaigns.{name}")
                 for name, raw in raw_campaigns.items()}
    for c in campaigns.values():
        for before in c.after:
            if before not in campaigns:
                raise ConfigError(f"campaign {c.name}: after {before!r}, which is not a campaign of {profile}")
    undecidable = {str(k): str(v) for k, v in (section.get("undecidable") or {}).items()}
    for claim_id in undecidable:
        if claim_id not in claim_ids:
            raise ConfigError(f"{Path(path).name}: {profile}.undecidable: unknown claim id {claim_id!r}")
        fed = [c.name for c in campaigns.values() if claim_id in c.feeds]
        if fed:
            raise ConfigError(f"{Path(path).name}: {claim_id} is listed as undecidable but {', '.join(fed)} feeds it")
    return Catalogue(profile=profile, campaigns=campaigns, undecidable=undecidable)
