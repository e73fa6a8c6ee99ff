"""The docstring under each field of the project's pydantic models, read from their source when asked.

Each field's docstring is the one statement of what it means; the generated config files and the checks read them
here. The models do not ask pydantic for them (``use_attribute_docstrings``): on Python before 3.13 pydantic finds a
class's source by walking the calling frames through ``inspect.getmodule``, which resolves the path of every loaded
module, once Snakemake's plugins are loaded some 1 700, and that was paid by every Snakemake parse and every cluster
job (bench/dry_run.py). Read here, a module's source is parsed once, only where a description is wanted.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import sys

from pydantic import BaseModel


def _field_docstrings_of(body: list[ast.stmt]) -> dict[str, str]:
    """``name: type`` (with or without a value) followed by a string, as pydantic reads them (cleaned)."""
    found: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[statement.target.id] = inspect.cleandoc(following.value.value)
    return found


@functools.cache
def _module_docstrings(module_name: str) -> dict[str, dict[str, str]]:
    """Class qualified name -> field -> docstring, for every class the module's source defines."""
    module = sys.modules.get(module_name)
    try:
        tree = ast.parse(inspect.getsource(module)) if module else None
    except (OSError, TypeError):  # no source (a frozen or generated module): no docstrings
        tree = None
    classes: dict[str, dict[str, str]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                classes[prefix + node.name] = _field_docstrings_of(node.body)
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, f"{prefix}{node.name}.<locals>.")

    visit(tree.body if tree else [], "")
    return classes


def field_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> docstring of ``model``'s fields (a base class's where the model does not redefine it)."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        found.update(_module_docstrings(cls.__module__).get(cls.__qualname__, {}))
    return {name: doc for name, doc in found.items() if name in model.model_fields}


def description(model: type[BaseModel], field: str) -> str:
    """What ``model.field`` means: its ``Field(description=...)``, else its docstring, else ''."""
    return model.model_fields[field].description or field_docstrings(model).get(field, "")


def with_descriptions(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` and every model among its fields' types, their docstrings set as their fields' descriptions (what
    ``use_attribute_docstrings`` does at class creation), rebuilt so that their JSON schema shows them."""
    seen: list[type[BaseModel]] = []

    def collect(cls: type[BaseModel]) -> None:
        if cls in seen:
            return
        for field in cls.model_fields.values():
            for candidate in _models_in(field.annotation):
                collect(candidate)
        seen.append(cls)  # after the models it holds: they are rebuilt first

    collect(model)
    for cls in seen:
        docs = field_docstrings(cls)
        changed = False
        for name, field in cls.model_fields.items():
            if field.description is None and name in docs:
                field.description = docs[name]
                changed = True
        if changed:
            cls.model_rebuild(force=True)
    return model


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in getattr(annotation, "__args__", ()) for model in _models_in(argument)]
