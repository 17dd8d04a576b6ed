"""``kvplan models``: the model specs bundled with kvplan."""

from __future__ import annotations

from kvplan.cli.options import Arg, Opt

FIELDS: dict[str, str] = {"format": "fmt"}
"""Library parameter -> this command's parameter, where they differ."""

ARGUMENT: Arg | None = None
OPTIONS: tuple[Opt, ...] = (Opt("fmt", ("--format", "-f"), "table", "table or json."),)
DOC = "List the bundled models (usable offline by id), with their layer kinds and KV bytes per token."


def options() -> tuple[Opt, ...]:
    return OPTIONS



def run(fmt: str) -> None:
    import sys

    from kvplan.engines import LIBRARY_ENGINE
    from kvplan.estimate import estimate
    from kvplan.sources.bundled import bundled_ids, load_bundled

    from kvplan.render.formats import check_format, write

    check_format("BundledModel", fmt)
    rows = []
    for model_id in bundled_ids():
        spec = load_bundled(model_id)
        assert spec is not None
        per_token = estimate(spec, contexts=[spec.max_position_embeddings or 8192],
                             engine=LIBRARY_ENGINE).rows[0]
        rows.append({"id": spec.id, "model_type": spec.model_type, "layers": spec.num_layers,
                     "layer_kinds": spec.layer_kind_counts(), "aliases": list(spec.aliases),
                     "max_position_embeddings": spec.max_position_embeddings,
                     "weights_bytes": spec.weights_bytes,
                     "kv_bytes_at_max_context": per_token.kv_bytes})
    write(rows, fmt, sys.stdout, kind="BundledModel")
