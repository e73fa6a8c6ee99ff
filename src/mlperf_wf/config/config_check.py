"""The workflow config against its schema (generated from ``workflow_config.WorkflowConfig``), as one line:
Snakemake's own ``validate`` prints the whole config (hundreds of lines) for a misspelled key."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mlperf_wf.errors import ConfigError

if TYPE_CHECKING:
    from mlperf_wf.config.workflow_config import WorkflowConfig


def _where(path: list[object]) -> str:
    return "config" + "".join(f".{part}" if isinstance(part, str) else f"[{part}]" for part in path)


def parsed_config(config: dict) -> WorkflowConfig:
    """``config`` as the typed model, every default filled in; refused with :func:`check_config`'s one line.

    The model and the schema accept the same configs (tests/config/test_config_schema.py), so the schema's validator
    (whose import alone is about a tenth of a parse) runs only to word a refusal."""
    from mlperf_wf.config.workflow_config import WorkflowConfig

    try:
        return WorkflowConfig.parse(config)
    except ConfigError:
        check_config(config)
        raise


def check_config(config: dict) -> None:
    """Raise ConfigError with one line for the first thing in ``config`` its schema does not allow."""
    import jsonschema

    from mlperf_wf.config.workflow_config import json_schema

    schema = json_schema()
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is None:
        return
    where = _where(list(error.absolute_path))
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        names = f"; allowed keys: {', '.join(allowed)}" if allowed and len(allowed) <= 40 else ""
        raise ConfigError(f"{where}: unknown key {', '.join(map(repr, unknown)) or '?'}{names}")
    shown = repr(error.instance)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    raise ConfigError(f"{where}: {shown} is not allowed: {message.replace(repr(error.instance), 'it')}")


def check_yaml(path: Path) -> None:
    """Raise ConfigError naming the file, line and column where ``path`` stops being YAML (Snakemake's own message
    names neither)."""
    import yaml

    from mlperf_wf.config import yaml_files

    if not path.is_file():
        return  # Snakemake says a missing config file itself
    try:
        yaml_files.load(path.read_text())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        lines = path.read_text().splitlines()
        at = lines[mark.line][mark.column : mark.column + 1] if mark is not None and mark.line < len(lines) else ""
        tab = "; it is a tab: indent with spaces (YAML allows no tabs in indentation)" if at == "\t" else ""
        raise ConfigError(f"{where}: not valid YAML: {err.problem or err}{tab}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None


# ---- the pre-check: what Snakemake parses before the workflow's own code runs ----
# Snakemake reads a --configfile and a --profile before the Snakefile: a tab in the one is "not valid JSON or YAML"
# (no file, no line), an unknown value in the other its whole usage. `mlperf-wf check --configfile F --profile P`
# says either in one line naming the file, the line and what is allowed.


def _mapping(path: Path) -> dict:
    """``path`` as YAML (its own one-line error when it is not), which must be a mapping."""
    from mlperf_wf.config import yaml_files

    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    check_yaml(path)
    data = yaml_files.load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: holds {type(data).__name__}, not a mapping of keys to values")
    return data


def _line_of(path: Path, keys: list[str]) -> int | None:
    """The line (from 1) of the key path ``keys`` in the YAML file ``path``; None when it is not there."""
    import yaml

    node = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    line = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return line
        found = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
        if found is None:
            return line
        line, node = found[0].start_mark.line + 1, found[1]
    return line


def _merged(base: dict, over: dict) -> dict:
    """``over`` over ``base``, nested mappings merged key by key (as Snakemake merges a --configfile over the config)."""
    merged = dict(base)
    for key, value in over.items():
        merged[key] = _merged(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def check_configfile(path: Path, config_file: Path) -> None:
    """A ``--configfile``: YAML, and with ``config_file`` (the workflow's config.yaml) under it, a config the workflow
    accepts; ConfigError naming the file and, where it can, the line."""
    import re

    data = _mapping(path)
    try:
        parsed_config(_merged(_mapping(config_file), data))
    except ConfigError as err:
        message = str(err)
        where = re.match(r"config((?:\.[\w-]+)*)(?:\[\d+\])*: (?:unknown key '([^']+)')?", message)
        keys = [part for part in where.group(1).split(".") if part] + ([where.group(2)] if where and where.group(2) else []) if where else []
        line = _line_of(path, keys) if keys else None
        raise ConfigError(f"{path}:{line}: {message}" if line else f"{path}: {message}") from None


def check_profile(profile: str) -> Path:
    """A Snakemake ``--profile`` (a name or a folder, as Snakemake finds it): its config.yaml is YAML, each key a
    Snakemake option and each value one that option allows; return the file, or raise ConfigError naming its line."""
    from snakemake.cli import get_argument_parser, get_profile_dir

    found = get_profile_dir(profile)
    if found is None:
        raise ConfigError(
            f"--profile {profile}: no profile folder (with a config.yaml) of that path, nor of that name here or in Snakemake's user and site config folders"
        )
    path = found[1]
    data = _mapping(path)
    options = {option: action for action in get_argument_parser()._actions for option in action.option_strings}
    for key, value in data.items():
        action = options.get(f"--{key}") or options.get(f"--{str(key).replace('_', '-')}")
        where = f"{path}:{_line_of(path, [key]) or '?'}"
        if action is None:
            raise ConfigError(f"{where}: {key}: not a snakemake option (`snakemake --help` lists them; write it without the --)")
        if action.choices and not isinstance(value, (dict, list)) and str(value) not in {str(choice) for choice in action.choices}:
            allowed = ", ".join(sorted(str(choice) for choice in action.choices))
            raise ConfigError(f"{where}: {key}: {value!r} is not allowed; allowed: {allowed} (another executor is a plugin to install)")
    return path


def read_configfile(path: Path) -> dict:
    """A config file given as ``--configfile`` (a mapping of config keys), one line when it is missing or not a mapping."""
    from mlperf_wf.config.registry import read_yaml

    if not path.is_file():
        raise ConfigError(f"--configfile {path}: no such file")
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"--configfile {path}: expected a mapping of config keys")
    return data


def config_overrides(items: list[str]) -> dict:
    """``KEY=VALUE`` words as Snakemake's ``--config`` reads them (values as YAML)."""
    import yaml

    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config {item!r}: expected KEY=VALUE, as given to snakemake --config")
        values[key] = yaml.safe_load(value)
    return values
