"""The typed tiny-tier hyperparameters every benchmark folder declares (``hyperparameters.py``).

A benchmark's ``Hyperparameters`` subclasses :class:`TinyHyperparameters`: its field defaults
are the tiny tier's values (the only place they are written), its ``mllog`` method maps the
values the training loop uses to the mllog keys the round requires, and the workflow config's
``tiny_hyperparameters`` may override fields by name. The module imports no torch, so the
Snakefile validates overrides when it is parsed, before any job runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from mlperf_wf.errors import ConfigError, describe_validation_error

if TYPE_CHECKING:
    from mlperf_wf.config.registry import BenchmarkDef


class TinyHyperparameters(BaseModel):
    """Base of every benchmark's tiny hyperparameter model: frozen, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    def mllog(self, world_size: int) -> dict[str, object]:
        """mllog key -> value for every hyperparameter the run logs, as the loop uses them on ``world_size`` processes."""
        raise NotImplementedError(f"{type(self).__module__}.{type(self).__name__} must define mllog(world_size)")


def hyperparameter_model(bench: BenchmarkDef) -> type[TinyHyperparameters]:
    """The ``Hyperparameters`` class of a benchmark folder (its defaults validated)."""
    module_name = f"{bench.module_prefix}.hyperparameters"
    path = bench.folder / "hyperparameters.py"
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{path}: cannot be imported: {err}") from None
    model = getattr(module, "Hyperparameters", None)
    if not (isinstance(model, type) and issubclass(model, TinyHyperparameters)):
        raise ConfigError(f"{path}: defines no Hyperparameters(TinyHyperparameters) model")
    try:
        model()
    except ValidationError as err:
        raise ConfigError(describe_validation_error(f"{path}: defaults", err)) from None
    return model


def resolve(bench: BenchmarkDef, overrides: dict | None = None, source: str = "config: tiny_hyperparameters") -> TinyHyperparameters:
    """The benchmark's tiny hyperparameters with ``overrides`` applied; a bad key or value is one line naming it."""
    model = hyperparameter_model(bench)
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(model.model_fields))
    if unknown:
        raise ConfigError(
            f"{source}.{bench.name}.{unknown[0]}: unknown hyperparameter (got {overrides[unknown[0]]!r}); allowed: {', '.join(model.model_fields)}"
        )
    try:
        return model(**overrides)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(f"{source}.{bench.name}", err, separator=".")) from None
