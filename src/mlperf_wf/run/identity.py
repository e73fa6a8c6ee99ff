"""A campaign's identity: what must be the same for every run of a set that is scored as one.

A set of runs is one result only when the same code, config and data made every run. Each run records its
:class:`CampaignIdentity` in its ``provenance.json`` (:func:`compute`, called by the train job's ``mlperf-wf
provenance``); :func:`identity_problems` compares the runs of a set, one line per run and field that differs.

The set's identity, field by field:

- ``config`` (the benchmark's resolved settings and hyperparameters) and ``image``: the workflow's own, as the config
  makes them now (:func:`expected`, written to ``results/<scale>/<benchmark>/identity.json``). A run made with other
  hyperparameters (a run folder copied from another campaign, the config changed and one run redone) is refused.
- the code (``commit``, ``dirty``, ``local_changes``), the package versions and the digests of the data read: the value
  most runs of the set share. A run made at another commit, from another edit of the tree, with another torch or
  mlperf-logging, or from other prepared data is refused; where no value has a majority (one run against one), every
  run that differs from another is.

A refused run is scored as a failed run (it counts as the set's one allowed failure at most) and makes the set
invalid, with these lines as the reasons. The workflow never retrains a run on its own because its identity changed
(the profiles rerun on newer inputs only: a multi-day run is not redone for an edited comment); the report says which
runs to delete to redo them with the set's identity.

A tree with uncommitted changes is no reason to refuse a run when every run of the set was made from the same
changes (the same ``local_changes`` digest); the report names it (:func:`notes`), since the commit alone does not say
which code made the runs.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mlperf_wf.errors import ConfigError, UserError

if TYPE_CHECKING:
    from mlperf_wf.plan.plan import Plan
    from mlperf_wf.results.scoring import RunScore

IDENTITY_FILE = "identity.json"
"""The set's expected identity, beside ``runs/`` in ``results/<scale>/<benchmark>/``."""


class CampaignIdentity(BaseModel):
    """What made a run (see the module docstring); a field that is None is unknown, or, in the set's expected
    identity, decided by the runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    commit: str | None = None
    """Commit of the workflow checkout the run was made from (None: no checkout found, the package ran outside one)."""
    dirty: bool | None = None
    """Whether that checkout had uncommitted changes to tracked files (None: not known)."""
    local_changes: str | None = None
    """sha256 of those changes (``git diff HEAD``), so that runs of one edited tree agree and runs of two edits
    differ; None for a clean tree."""
    config: dict[str, Any] | None = None
    """The benchmark's resolved settings: scale, ruleset, division, preparation, processes and every hyperparameter
    (tiny scale: the typed model with the config's ``tiny_hyperparameters``; full scale: ``full_hyperparameters`` and
    the geometry)."""
    image: str | None = None
    """The image the run ran in, with its digest where the reference carries one (None: on the host)."""
    data: dict[str, str] | None = None
    """Digest of every input the run read, by path (:func:`data_digests`): the prepared tree's files (paths, sizes,
    mtimes), the verified datasets' records (their files' md5)."""
    packages: dict[str, str | None] | None = None
    """Versions of the packages that shape a result (mlperf-logging, torch, transformers, ..., this workflow)."""


PROVENANCE_KEYS: dict[str, tuple[str, ...]] = {
    "commit": ("workflow_git", "commit"),
    "dirty": ("workflow_git", "dirty"),
    "local_changes": ("workflow_git", "local_changes"),
    "config": ("config",),
    "image": ("image",),
    "data": ("data",),
    "packages": ("packages",),
}
"""Where each field of the identity is in ``provenance.json`` (the keys it has always had, and ``config``)."""

DECIDED_BY_THE_WORKFLOW = ("config", "image")
"""Fields whose set value is the workflow's (``identity.json``); the others are the value most runs share."""

_ABSENT = "(not recorded)"


# ---- computing it (one place) ----


def git_state(root: Path | None) -> dict:
    """Commit, whether tracked files have uncommitted changes, and the sha256 of those changes (None for each where
    the checkout is not found: a node that runs the installed package outside it)."""
    unknown = {"commit": None, "dirty": None, "local_changes": None}
    if root is None:
        return unknown
    commit = _git(["rev-parse", "HEAD"], root)
    diff = _git(["diff", "HEAD", "--binary", "--no-color", "--no-ext-diff"], root)
    if commit is None:
        return unknown
    dirty = None if diff is None else bool(diff.strip())
    changes = hashlib.sha256(diff.encode()).hexdigest() if dirty else None
    return {"commit": commit.strip(), "dirty": dirty, "local_changes": changes}


def _git(args: list[str], root: Path) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def data_digests(inputs: list[Path]) -> dict[str, str]:
    """What a run read, by path, as digests that change with the data and not with where it lies: a prepared tree, the
    sha256 of its files' paths, sizes and mtimes (from its stamps: a tree copied or moved whole, or re-recorded with
    new inodes, keeps it); a verification record, the sha256 of its dataset, manifest and files with their md5 (not
    its timing); another file, the sha256 of its bytes; a folder without stamps, ``folder``."""
    import gzip

    from mlperf_wf.acquire.verify import hash_file

    digests = {}
    for path in inputs:
        stamps = path.with_name(f"{path.name}.stamps.json.gz")
        try:
            if path.is_dir() and stamps.is_file():
                with gzip.open(stamps, "rt") as handle:
                    files = json.load(handle)
                content = sorted((name, stat[0], stat[1]) for name, stat in files.items())
                digests[str(path)] = "tree " + hashlib.sha256(json.dumps(content).encode()).hexdigest()
            elif path.is_file() and path.suffix == ".json" and isinstance(record := json.loads(path.read_text()), dict) and "files" in record:
                kept = {key: record.get(key) for key in ("dataset", "manifest", "files")}
                digests[str(path)] = "record " + hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()
            elif path.is_file():
                digests[str(path)] = hash_file(path, {"sha256": hashlib.sha256()})["sha256"].hexdigest()
            else:
                digests[str(path)] = "folder"
        except (OSError, ValueError) as err:
            digests[str(path)] = f"unreadable ({type(err).__name__})"
    return digests


def config_of(plan: Plan, name: str) -> dict[str, Any]:
    """The resolved settings of benchmark ``name`` that shape its runs' results (:attr:`CampaignIdentity.config`)."""
    own = plan.of(name)
    settings = own.launch_settings()
    config: dict[str, Any] = {
        "benchmark": name,
        "scale": str(plan.scale),
        "ruleset": own.ruleset(),
        "division": own.division(),
        "preparation": own.preparation(),
    }
    if plan.scale == "tiny":
        config["processes"] = settings.tiny_processes
        config["hyperparameters"] = own.hyperparameters().model_dump(mode="json")
    else:
        config["nodes"] = settings.nodes
        config["gpus_per_node"] = settings.gpus_per_node
        config["hyperparameters"] = _full_hyperparameters(plan, name, settings.nodes, settings.gpus_per_node)
        config["arguments"] = [list(pair) for pair in settings.arguments]
    return json.loads(json.dumps(config, sort_keys=True))


def _full_hyperparameters(plan: Plan, name: str, nodes: int, gpus_per_node: int) -> dict[str, Any]:
    """What the full-scale command gets: the planned batch split and RCP values on this geometry, or the site's
    overrides as given where the benchmark has no sizing."""
    try:
        planned = plan.of(name).planned_batch(nodes, gpus_per_node)
    except ConfigError:
        planned = None  # a batch the geometry cannot make: the preflight says why, and no run of it is made
    if planned is None:
        return dict(plan.settings.full_hyperparameters.get(name, {}))
    split = planned.split
    return {"global_batch_size": split.gbs, **planned.values, "replicas": split.replicas, "micro_batch": split.micro_batch, "accumulation": split.accumulation}


def expected(plan: Plan, name: str) -> CampaignIdentity:
    """The set's identity as the workflow makes it now: the fields it decides (:data:`DECIDED_BY_THE_WORKFLOW`)."""
    try:
        image = plan.of(name).train_job(0).image
    except ConfigError:
        image = None  # a job the config cannot make: the preflight says why, and no run of it is made
    return CampaignIdentity(config=config_of(plan, name), image=image or None)


def compute(config: dict | None, root: Path | None, data: dict[str, str] | None, image: str | None, packages: dict[str, str | None]) -> CampaignIdentity:
    """A run's identity, in the train job that made it: ``config`` as the plan gave it, the checkout's state now."""
    return CampaignIdentity(**git_state(root), config=config, image=image or None, data=data or None, packages=packages)


def provenance_fields(identity: CampaignIdentity) -> dict:
    """The identity as ``provenance.json`` holds it (:data:`PROVENANCE_KEYS`)."""
    record: dict = {}
    for name, keys in PROVENANCE_KEYS.items():
        value = getattr(identity, name)
        if name == "data" and value is None:
            continue  # a run that read nothing recorded has no ``data``
        target = record
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value
    return record


def _lookup(record: dict, keys: tuple[str, ...]) -> object:
    value: object = record
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return _ABSENT
        value = value[key]
    return value


# ---- the expected identity file ----


def write_expected(identity: CampaignIdentity, out: Path) -> None:
    """Write the set's identity (``identity.json``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(identity.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")


def read_expected(path: Path) -> CampaignIdentity:
    """Read ``identity.json``; a file that is not one is a one-line error naming it."""
    try:
        return CampaignIdentity.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError, ValidationError) as err:
        what = err.strerror if isinstance(err, OSError) else "not a campaign identity"
        raise ConfigError(f"{path}: {what}; delete it and rerun the workflow to write it again") from None


def changed(path: Path, identity: CampaignIdentity) -> bool:
    """Whether ``path`` holds another identity than ``identity`` (True for a file that cannot be read)."""
    if not path.is_file():
        return False
    try:
        return read_expected(path) != identity
    except ConfigError:
        return True


# ---- comparing ----


def _flatten(value: object, prefix: str) -> dict[str, object]:
    if isinstance(value, dict) and value:
        flat: dict[str, object] = {}
        for key in sorted(value):
            flat.update(_flatten(value[key], f"{prefix}.{key}"))
        return flat
    return {prefix: value}


def _show(value: object) -> str:
    return value if value == _ABSENT else json.dumps(value, sort_keys=True)


def _values(record: dict | None, name: str) -> dict[str, object]:
    """Field ``name`` of a run's provenance, flattened to dotted keys (``packages.torch``)."""
    value = _ABSENT if record is None else _lookup(record, PROVENANCE_KEYS[name])
    label = "workflow_git." + name if name in ("commit", "dirty", "local_changes") else name
    if name == "data" and isinstance(value, dict):
        return {f"data[{path}]": digest for path, digest in sorted(value.items())}
    return _flatten(value, label)


def problems_by_run(runs: dict[str, dict | None], expected_identity: CampaignIdentity | None = None, source: str = IDENTITY_FILE) -> dict[str, list[str]]:
    """For each run (its ``provenance.json`` path -> its record, None where it has none), why its identity is not its
    set's: one line per field, naming the file, the field, the run's value and the set's (see the module docstring).

    A set none of whose runs has a provenance (a folder of plain logs) has no identity to compare: no problems."""
    if not any(record is not None for record in runs.values()):
        return {run: [] for run in runs}
    found: dict[str, list[str]] = {run: [] for run in runs}
    for run, record in runs.items():
        if record is None:
            found[run].append(f"{run}: missing: what made this run is unknown, and the other runs of its set record it")
    recorded = {run: record for run, record in runs.items() if record is not None}
    for name in PROVENANCE_KEYS:
        wanted = getattr(expected_identity, name) if expected_identity is not None and name in DECIDED_BY_THE_WORKFLOW else None
        per_run = {run: _values(record, name) for run, record in recorded.items()}
        if wanted is not None:
            want = _flatten(wanted, name)
            for run, values in per_run.items():
                if _lookup(recorded[run], PROVENANCE_KEYS[name]) == _ABSENT:
                    found[run].append(f"{run}: {name} {_ABSENT} (made before runs recorded it), the campaign's is in {source}")
                    continue
                for key in sorted(set(want) | set(values)):
                    have, should = values.get(key, _ABSENT), want.get(key, _ABSENT)
                    if have != should:
                        found[run].append(f"{run}: {key} {_show(have)}, the campaign's is {_show(should)} ({source})")
            continue
        keys = sorted({key for values in per_run.values() for key in values})
        for key in keys:
            column = {run: json.dumps(values.get(key, _ABSENT), sort_keys=True) for run, values in per_run.items()}
            counts = Counter(column.values()).most_common()
            if len(counts) < 2:
                continue
            majority = counts[0][0] if counts[0][1] > counts[1][1] else None
            for run, value in column.items():
                if majority is not None and value != majority:
                    shared = f"{counts[0][1]} of {len(column)} runs have {_show(json.loads(majority))}"
                    found[run].append(f"{run}: {key} {_show(json.loads(value))}, the set's is {_show(json.loads(majority))} ({shared})")
                elif majority is None:
                    others = ", ".join(_show(json.loads(other)) for other in sorted({v for v in column.values() if v != value}))
                    found[run].append(f"{run}: {key} {_show(json.loads(value))}, other runs of the set have {others} (no value most runs share)")
    return found


def identity_problems(runs: dict[str, dict | None], expected_identity: CampaignIdentity | None = None, source: str = IDENTITY_FILE) -> list[str]:
    """Every line of :func:`problems_by_run`, in the runs' order: why runs of this set were made with another identity."""
    return [line for lines in problems_by_run(runs, expected_identity, source).values() for line in lines]


def notes(runs: dict[str, dict | None]) -> list[str]:
    """What the report says about the set's identity without refusing a run: runs made from a checkout with
    uncommitted changes (the commit alone does not say which code made them)."""
    edited = [record for record in runs.values() if record and _lookup(record, PROVENANCE_KEYS["dirty"]) is True]
    dirty = sorted({_lookup(record, PROVENANCE_KEYS["local_changes"]) for record in edited}, key=str)
    if not dirty:
        return []
    digests = ", ".join(str(d)[:12] for d in dirty)
    return [f"runs were made from a checkout with uncommitted changes (diff sha256 {digests}): their commit alone does not say which code made them"]


def read_provenance(path: Path) -> dict | None:
    """A run's provenance record; None where it has none. One that cannot be read is recorded as an empty record,
    so that every field of it differs from the set's and the run is refused by name."""
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def of_folder(folder: Path, result_files: list[str] | tuple[str, ...]) -> dict[str, list[str]]:
    """Identity problems of the runs of a workflow's ``results/<scale>/<benchmark>/`` folder, by result file: its
    ``runs/<i>/provenance.json`` against its ``identity.json`` (where the workflow wrote one) and each other. A folder
    whose runs have no provenance (a submission's ``result_*.txt``) has none."""
    runs = {str(Path(result).parent / "provenance.json"): read_provenance(Path(result).parent / "provenance.json") for result in result_files}
    expected_file = Path(folder) / IDENTITY_FILE
    expected_identity = read_expected(expected_file) if expected_file.is_file() else None
    found = problems_by_run(runs, expected_identity, str(expected_file))
    return {result: found[str(Path(result).parent / "provenance.json")] for result in result_files}


def of_workflow_runs(plan: Plan, name: str, root: Path, runs: list[int]) -> dict[int, list[str]]:
    """Identity problems of runs ``runs`` (indices) of benchmark ``name`` in the campaign folder ``root``, against
    the identity the config makes now: the lines the report gives them (its paths, relative to ``root``)."""
    if not runs:
        return {}
    files = {index: plan.of(name).run_file(index, "provenance.json") for index in runs}
    found = problems_by_run({files[i]: read_provenance(root / files[i]) for i in runs}, expected(plan, name), f"{plan.results_root}/{name}/{IDENTITY_FILE}")
    return {index: found[files[index]] for index in runs}


def set_reason(refused: list[str]) -> str | None:
    """Why a set with refused runs (``refused``: their result files) is not valid, naming their folders; None when none is."""
    if not refused:
        return None
    folders = " ".join(str(Path(file).parent) for file in refused)
    return (
        f"{len(refused)} run(s) made with another campaign identity than their set's (code, config, data, image or packages; "
        f"each run's problems say which) are not scored: delete {folders} to redo them with the set's"
    )


def refuse(run: RunScore, problems: list[str]) -> None:
    """Score ``run`` as a failed run because its identity is not its set's: no time, no energy, the lines as its problems."""
    from mlperf_wf.kinds import Verdict

    if not problems:
        return
    run.minutes = None
    run.compliant = False
    run.verdict = Verdict.FAILED
    run.samples_to_converge = None
    run.energy_joules = None
    run.problems = list(dict.fromkeys([*problems, *run.problems]))


def write_expected_json(identity_json: str, out: Path) -> None:
    """Write the campaign identity of a benchmark's set (``identity.json``) from its JSON, checked against its model."""
    try:
        made = CampaignIdentity.model_validate_json(identity_json)
    except ValidationError as err:
        raise UserError(f"identity: --json: not a campaign identity ({err.errors()[0]['loc']}: {err.errors()[0]['msg']})") from None
    write_expected(made, out)
