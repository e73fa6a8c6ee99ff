"""Field docstrings read from the source (``mlperf_wf.config.docstrings``): the same text pydantic would read, and no
model asks pydantic to read them at class creation (the frame walk every Snakemake parse paid)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
from pydantic import BaseModel
from pydantic._internal._docs_extraction import extract_docstrings_from_cls

from mlperf_wf.config import docstrings, hyperparameters, registry, workflow_config
from mlperf_wf.results import package
from mlperf_wf.run import power

MODULES = [registry, workflow_config, power, package]


def _models() -> list[type[BaseModel]]:
    found = [
        value
        for module in MODULES
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__
    ]
    found += [hyperparameters.hyperparameter_model(registry.load_benchmark(name)) for name in registry.benchmark_names()]
    return found


@pytest.mark.parametrize("model", _models(), ids=lambda model: f"{model.__module__}.{model.__qualname__}")
def test_each_field_s_docstring_is_what_pydantic_reads(model):
    ours = docstrings.field_docstrings(model)
    for cls in model.__mro__:
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        own = set(inspect.get_annotations(cls)) & set(model.model_fields)
        pydantics = extract_docstrings_from_cls(cls, use_inspect=True)
        for name in own:
            if name in pydantics and name not in _redefined_below(model, cls, name):
                assert ours.get(name) == pydantics[name], (cls, name)


def _redefined_below(model: type[BaseModel], cls: type, name: str) -> set[str]:
    """``{name}`` when a class between ``model`` and ``cls`` in the MRO annotates ``name`` again (its text wins)."""
    for between in model.__mro__[: model.__mro__.index(cls)]:
        if name in inspect.get_annotations(between):
            return {name}
    return set()


def test_the_generated_config_files_carry_every_description():
    schema = workflow_config.json_schema()
    assert schema["properties"]["runs"]["description"].startswith("Runs per benchmark.")
    assert schema["properties"]["submission"]["properties"]["org"]["description"] == "`submission_org` each run logs."


def test_no_model_reads_its_docstrings_at_class_creation():
    """After Snakemake's modules are loaded (as in a parse), creating the project's models asks ``inspect.getmodule``
    nothing: pydantic's ``use_attribute_docstrings`` walks the calling frames through it."""
    script = """
import inspect, snakemake.api
calls = []
original = inspect.getmodule
inspect.getmodule = lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs)
from mlperf_wf.config import hyperparameters, registry, workflow_config
from mlperf_wf.plan import plan
from mlperf_wf.results import package
for name in registry.benchmark_names():
    hyperparameters.hyperparameter_model(registry.load_benchmark(name))
print(len(calls))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0", done.stdout
