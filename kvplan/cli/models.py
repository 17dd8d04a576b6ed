"""``kvplan models``: the model specs bundled with kvplan."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.cli.options import Arg, Opt

if TYPE_CHECKING:
    from typing import Any

FIELDS: dict[str, str] = {"format": "fmt"}
"""Library parameter -> this command's parameter, where they differ."""

ARGUMENT: Arg | None = None
OPTIONS: tuple[Opt, ...] = (Opt("fmt", ("--format", "-f"), "table", "table or json."),)
DOC = "List the bundled models (usable offline by id), with their layer kinds and KV bytes per token."


def options() -> tuple[Opt, ...]:
    return OPTIONS



INDEX = "models.json"
"""This command's rows for every bundled model, beside ``bundle.json`` (written by tools/build_data.py, checked
equal to ``compute_rows`` by tests/test_data_json.py): listing them reads one small file instead of loading and
estimating every spec (about 200 ms)."""


def run(fmt: str) -> None:
    import sys

    from kvplan.render.formats import check_format, write

    check_format("BundledModel", fmt)
    write(rows(), fmt, sys.stdout, kind="BundledModel")


def rows() -> list[dict[str, Any]]:
    """The rows, from the index where it was built."""
    from kvplan.jsontext import loads  # json's own reading, without importing json (and re)
    from kvplan.sources.bundled import spec_file

    try:
        with open(spec_file(INDEX), encoding="utf-8") as f:
            return list(loads(f.read())["models"])
    except FileNotFoundError:
        return compute_rows()


def compute_rows() -> list[dict[str, Any]]:
    """Each bundled model's row: its layers, and the KV bytes of one sequence at its longest context."""
    from kvplan.engines import LIBRARY_ENGINE
    from kvplan.estimate import estimate
    from kvplan.sources.bundled import bundled_ids, load_bundled

    out = []
    for model_id in bundled_ids():
        spec = load_bundled(model_id)
        assert spec is not None
        per_token = estimate(spec, contexts=[spec.max_position_embeddings or 8192],
                             engine=LIBRARY_ENGINE).rows[0]
        out.append({"id": spec.id, "model_type": spec.model_type, "layers": spec.num_layers,
                    "layer_kinds": spec.layer_kind_counts(), "aliases": list(spec.aliases),
                    "max_position_embeddings": spec.max_position_embeddings,
                    "weights_bytes": spec.weights_bytes,
                    "kv_bytes_at_max_context": per_token.kv_bytes})
    return out
