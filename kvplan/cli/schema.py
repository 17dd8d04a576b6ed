"""``kvplan schema``: the JSON schemas of kvplan's YAML formats (model spec, deployment file)."""

from __future__ import annotations

from kvplan.cli.options import Arg, Opt

FIELDS: dict[str, str] = {}
"""Library parameter -> this command's parameter, where they differ."""

ARGUMENT = Arg("what", "Which schema: model (the YAML model spec format), deployment (the `kvplan check` deployment "
               "file), calibration (`kvplan log --save`) or prices (`kvplan fit --prices`).", default="model")
OPTIONS: tuple[Opt, ...] = ()
DOC = "Print the JSON schema of a kvplan file format, for editors and validators."


def options() -> tuple[Opt, ...]:
    return OPTIONS



def run(what: str) -> None:
    import json
    import sys

    from kvplan.errors import UsageError

    if what not in ("model", "deployment", "calibration", "prices"):
        raise UsageError(f"unknown schema '{what}' (known: model, deployment, calibration, prices)", field="what")
    if what == "prices":
        from kvplan.fit import prices_schema

        sys.stdout.write(json.dumps(prices_schema(), indent=2) + "\n")
        return
    if what == "calibration":
        from kvplan.logs.calibration import schema as calibration_schema

        sys.stdout.write(json.dumps(calibration_schema(), indent=2) + "\n")
        return
    if what == "deployment":
        from kvplan.deploy.kvplan_file import schema as deployment_schema

        sys.stdout.write(json.dumps(deployment_schema(), indent=2) + "\n")
        return
    from kvplan.sources.yaml_spec import spec_adapter

    schema = spec_adapter().json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kvplan model spec"
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
