"""``kvplan schema``: the JSON schema of kvplan's YAML model spec format."""

from __future__ import annotations

import typer


def schema_command(
    what: str = typer.Argument("model", help="Which schema: model (the YAML model spec format)."),
) -> None:
    """Print the JSON schema of a kvplan file format, for editors and validators."""
    import json
    import sys

    from kvplan.errors import UsageError

    if what != "model":
        raise UsageError(f"unknown schema '{what}' (known: model)")
    from kvplan.sources.yaml_spec import spec_adapter

    schema = spec_adapter().json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kvplan model spec"
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
