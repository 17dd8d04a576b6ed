"""``kvplan models``: the model specs bundled with kvplan."""

from __future__ import annotations

from collections.abc import Callable

import typer

FIELDS: dict[str, str] = {"format": "fmt"}
"""Library parameter -> this command's parameter, where they differ."""


def command() -> Callable[..., None]:
    """The typer command function."""
    return models_command


def models_command(
    fmt: str = typer.Option("table", "--format", "-f", help="table or json."),
) -> None:
    """List the bundled models (usable offline by id), with their layer kinds and KV bytes per token."""
    import json
    import sys

    from kvplan.errors import UsageError
    from kvplan.estimate import estimate
    from kvplan.sources.bundled import bundled_ids, load_bundled

    if fmt not in ("table", "json"):
        raise UsageError(f"unknown format '{fmt}' (known: table, json)", field="fmt")
    rows = []
    for model_id in bundled_ids():
        spec = load_bundled(model_id)
        assert spec is not None
        per_token = estimate(spec, contexts=[spec.max_position_embeddings or 8192], engine="hf").rows[0]
        rows.append({"id": spec.id, "model_type": spec.model_type, "layers": spec.num_layers,
                     "layer_kinds": spec.layer_kind_counts(), "aliases": list(spec.aliases),
                     "max_position_embeddings": spec.max_position_embeddings,
                     "weights_bytes": spec.weights_bytes,
                     "kv_bytes_at_max_context": per_token.kv_bytes})
    if fmt == "json":
        sys.stdout.write(json.dumps({"models": rows}, indent=2) + "\n")
        return
    from rich.table import Table

    from kvplan.render.console import make_console, never_cut
    from kvplan.units import format_bytes

    table = Table(title="Bundled models (transformers cache, model dtype, one sequence at max context)",
                  title_justify="left")
    for name in ("id", "type", "layers", "kinds", "max context", "KV at max context", "weights"):
        table.add_column(name, justify="right" if name in ("layers", "max context", "KV at max context", "weights") else "left")
    for r in rows:
        kinds = ", ".join(f"{n} {k}" for k, n in r["layer_kinds"].items())
        table.add_row(r["id"], r["model_type"], str(r["layers"]), kinds,
                      f"{r['max_position_embeddings'] or 0:,}", format_bytes(r["kv_bytes_at_max_context"]),
                      format_bytes(r["weights_bytes"]) if r["weights_bytes"] else "?")
    make_console().print(never_cut(table))
