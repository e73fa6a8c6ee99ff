"""The config schema documents every key, and config.yaml and config/README.md agree with it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def properties(schema: dict, prefix: str = ""):
    for key, spec in schema.get("properties", {}).items():
        yield f"{prefix}{key}", spec
        if spec.get("type") == "object":
            yield from properties(spec, f"{prefix}{key}.")


def test_every_key_has_description_and_default_and_is_documented():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    readme = (ROOT / "config/README.md").read_text()
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    for name, spec in properties(schema):
        assert spec.get("description"), f"{name} has no description"
        assert "default" in spec, f"{name} has no default"
        assert f"`{name}`" in readme, f"{name} is not in config/README.md"
        if spec.get("type") != "object":
            value = config
            for part in name.split("."):
                value = value[part]
            assert value == spec["default"], f"config.yaml {name}={value!r} differs from the schema default {spec['default']!r}"
