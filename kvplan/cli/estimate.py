"""``kvplan estimate``: KV-cache footprint tables and sweeps."""

from __future__ import annotations

from typing import Optional

import typer

from kvplan.render import FORMATS


def estimate_command(
    model: str = typer.Argument(..., help="Bundled model id (e.g. meta-llama/Llama-3.1-8B), a config.json, "
                                          "a model directory or a YAML spec.", show_default=False),
    context: Optional[str] = typer.Option(
        None, "--context", "-c",
        help="Context lengths in tokens: 8192, 8k (k = 1024), lists 4k,32k, ranges 1k..128k (doubling) "
             "or 1k..8k:1k (step). Default: 1k..max_position_embeddings.", show_default=False),
    batch: str = typer.Option("1", "--batch", "-b", help="Concurrent sequences: 1,8,32 or 1..64 (doubling)."),
    kv_dtype: str = typer.Option(
        "auto", "--kv-dtype", "-d",
        help="KV cache dtypes, comma separated: auto (the engine's default), bf16, fp16, fp32, fp8, fp8_e5m2, "
             "int8_per_token_head, fp8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla (vLLM, MLA), "
             "q8_0, q4_0, ... (llama.cpp)."),
    engine: str = typer.Option("vllm", "--engine", "-e",
                               help="Cache layout rules: vllm, sglang, trtllm, llamacpp, hf (transformers "
                                    "DynamicCache) or hf-static (StaticCache)."),
    engine_version: Optional[str] = typer.Option(
        None, "--engine-version", help="Which release's rules apply, e.g. 0.10 (vLLM) or 4.57 (transformers). "
                                       "Default: the newest kvplan knows.", show_default=False),
    block_size: Optional[int] = typer.Option(None, "--block-size",
                                             help="Override the engine's page size in tokens.", show_default=False),
    fmt: str = typer.Option("table", "--format", "-f", help=f"Output format: {', '.join(FORMATS)}."),
    by_layer: bool = typer.Option(False, "--by-layer", help="Break every row down per layer."),
    explain: bool = typer.Option(False, "--explain", help="Show the formula behind each number."),
    plot: bool = typer.Option(False, "--plot", help="Draw KV size against context (terminal chart)."),
) -> None:
    """KV-cache bytes per (batch, context, kv dtype): exact integers, with the formula and every assumption.

    Examples:

      kvplan estimate meta-llama/Llama-3.1-8B --context 8k,32k,128k --batch 1,8,32 --kv-dtype bf16,fp8

      kvplan estimate ./my-model/config.json --engine vllm --by-layer --explain

      kvplan estimate deepseek-ai/DeepSeek-V3 --engine hf --engine-version 4.57
    """
    from kvplan.errors import UsageError
    from kvplan.estimate import estimate
    from kvplan.sources.resolve import load_model
    from kvplan.units import parse_count_list, parse_name_list

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format: unknown format '{fmt}' (known: {', '.join(FORMATS)})")
    spec = load_model(model)
    batches = parse_count_list(batch, "batch")
    dtypes = parse_name_list(kv_dtype, "kv-dtype")
    if context is None:
        top = spec.max_position_embeddings or 8192
        contexts = parse_count_list(f"1k..{max(top, 1024)}", "context") if top > 1024 else [top]
    else:
        contexts = parse_count_list(context, "context")
    result = estimate(spec, contexts=contexts, batches=batches, kv_dtypes=dtypes, engine=engine,
                      engine_version=engine_version, block_size=block_size, by_layer=by_layer)
    if context is None:
        result = _with_note(result, f"contexts default to 1k..max_position_embeddings ({contexts[-1]:,}); "
                                    "choose with --context")
    _render(result, fmt, by_layer, explain, plot)


def _with_note(result, note: str):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(result, assumptions=(*result.assumptions, note))


def _render(result, fmt: str, by_layer: bool, explain: bool, plot: bool) -> None:  # type: ignore[no-untyped-def]
    import sys

    if fmt == "json":
        from kvplan.render.json_out import dumps

        sys.stdout.write(dumps(result.to_dict(explain=explain)))
    elif fmt == "csv":
        from kvplan.render.csv_out import estimate_csv

        sys.stdout.write(estimate_csv(result, by_layer))
    elif fmt == "markdown":
        from kvplan.render.markdown import estimate_markdown

        sys.stdout.write(estimate_markdown(result, by_layer, explain))
    else:
        from rich.console import Console

        from kvplan.render.table import print_estimate

        console = Console()
        print_estimate(console, result, by_layer, explain)
        if plot:
            from kvplan.render.plot import estimate_plot

            console.print(estimate_plot(result), highlight=False, markup=False)
        return
    if plot:
        sys.stderr.write("kvplan: --plot draws only with --format table\n")
