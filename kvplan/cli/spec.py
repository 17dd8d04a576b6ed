"""``kvplan spec``: write a model's resolved description as YAML, to pin it for offline use."""

from __future__ import annotations

from typing import Any

from kvplan.cli.options import MODEL_HELP, Arg, Opt

FIELDS: dict[str, str] = {"name": "model", "id": "model_id"}
"""Library parameter -> this command's parameter, where they differ."""

ARGUMENT = Arg("model", MODEL_HELP)
OPTIONS: tuple[Opt, ...] = (
    Opt("revision", ("--revision",), None, "Hugging Face Hub revision (branch, tag or commit); implies the Hub."),
    Opt("hub", ("--hub",), False, "Read MODEL from the Hub even when a bundled spec has its id.", flag=True),
    Opt("output", ("--output", "-o"), None, "Write to this file instead of stdout.", path=True),
    Opt("model_id", ("--id",), None, "The spec's id, as deployments name the model (org/name): for a local "
        "config.json, whose id is otherwise its directory's name."),
)
DOC = """Print the model description kvplan computes with, as a YAML spec (the format of model_specs/).

    The spec names its source, the Hub commit and the weights bytes; `kvplan estimate spec.yaml` reads
    it back without network, so CI can pin a model:

      kvplan spec Qwen/Qwen3-32B --hub > qwen3-32b.yaml

    Offline, from a local config.json or model directory (its model.safetensors.index.json or safetensors
    headers give the exact weights), named as the deployments name the model:

      kvplan spec ./Qwen3-32B/config.json --id Qwen/Qwen3-32B > specs/qwen3-32b.yaml
    """


def options() -> tuple[Opt, ...]:
    return OPTIONS


def run(model: str, revision: str | None, hub: bool, output: Any, model_id: str | None) -> None:
    import sys

    from kvplan.sources.resolve import load_model
    from kvplan.sources.yaml_spec import dump_spec_yaml

    spec = load_model(model, revision=revision, hub=hub)
    if model_id is not None:
        from kvplan.record import replace

        spec = replace(spec, id=checked_id(model_id))
    where = f"{spec.source or spec.id}" + (f" at commit {spec.revision}" if spec.revision else "")
    text = (f"# {spec.id}: written by `kvplan spec` from {where}.\n"
            "# `kvplan estimate THIS_FILE` reads it back offline.\n") + dump_spec_yaml(spec)
    if output is None:
        sys.stdout.write(text)
        return
    from kvplan.errors import UsageError

    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{output}: cannot write ({exc.strerror or exc})", field="output") from None


MAX_ID = 200
"""Characters in a model id: Hub ids are at most 96 (org 42 + name 96 with the slash, in practice far fewer)."""


def checked_id(text: str) -> str:
    """A model id as given to ``--id``: one line of printable text, no surrounding spaces, at most 200
    characters; else a one-line error naming --id."""
    from kvplan.errors import UsageError

    value = text.strip()
    if not value or len(value) > MAX_ID or not value.isprintable():
        shown = repr(text[:40]) + ("..." if len(text) > 40 else "")
        raise UsageError(f"{shown} is not a model id (one line of printable text, 1 to {MAX_ID} characters, "
                         "e.g. Qwen/Qwen3-32B)", field="id")
    return value
