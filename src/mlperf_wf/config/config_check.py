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
        raise ConfigError(f"{where}: not valid YAML: {err.problem or err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
