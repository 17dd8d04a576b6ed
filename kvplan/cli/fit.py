"""``kvplan fit``: which GPUs, how many, at what cost, and the command that deploys each (docs/fit.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from kvplan.cli.options import engine_help
from kvplan.engines import DEFAULT_ENGINE

FIELDS = {"gpus": "gpus", "engines": "engine", "kv_dtypes": "kv_dtype", "catalog": "gpu_catalog", "name": "model",
          "format": "fmt"}
"""Library parameter (``kvplan.fit``) -> this command's parameter, where they differ."""


def command() -> Callable[..., None]:
    return fit_command


def fit_command(
    model: str = typer.Argument(..., help="Bundled model id, config.json, model directory or YAML spec."),
    context: str = typer.Option(..., "--context", "-c", help="Tokens per sequence (its max-model-len), e.g. 32k "
                                "(k = 1024)."),
    concurrency: str = typer.Option(..., "--concurrency", help="Sequences of --context served at once, e.g. 64."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="GPU types to rank, e.g. H100,H200,MI300X (default: "
                                       "every GPU in `kvplan gpus`, or every GPU priced in --prices)."),
    engine: str = typer.Option(DEFAULT_ENGINE, "--engine", "-e", help=engine_help("Engines to compare", several=True)),
    kv_dtype: str = typer.Option("auto", "--kv-dtype", "--kv-cache-dtype", help="KV dtypes to compare, e.g. "
                                 "auto,fp8."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="Which release's rules (default: "
                                                 "the newest kvplan knows)."),
    gpus_per_node: str = typer.Option("8", "--gpus-per-node", help="GPUs a node holds: tp within a node, "
                                      "pipeline stages across nodes."),
    prompt_len: Optional[str] = typer.Option(None, "--prompt-len", help="Prompt tokens of a request, for the "
                                             "time-to-first-token bound (default: the context)."),
    prices: Optional[Path] = typer.Option(None, "--prices", help="Your $/GPU-hour (YAML or JSON; `kvplan schema "
                                          "prices`): rows sorted by $/hour, with $ per million output tokens."),
    gpu_catalog: Optional[Path] = typer.Option(None, "--gpu-catalog", help="A YAML file adding GPUs to the catalog."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Also draw GPUs (or $/hour) per GPU type into this "
                                       "file: .png or .svg."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, json, csv or markdown."),
) -> None:
    """The smallest deployment of each GPU type that holds a workload, by each engine's own memory rules.

    Each row: GPUs (tp x pp x dp), the KV tokens and concurrency it holds (what `kvplan max-batch` prints for
    that deployment), the KV memory left over, the decode-step and time-to-first-token bounds, your prices, and
    the command that starts it. docs/fit.md explains the bounds and the prices file.

    Examples:

      kvplan fit meta-llama/Llama-3.1-70B --context 32k --concurrency 64

      kvplan fit deepseek-ai/DeepSeek-V3 -c 16k --concurrency 128 -e vllm,sglang --kv-dtype bf16,fp8 --gpus H100,H200,B200,MI300X

      kvplan fit Qwen/Qwen3-235B-A22B -c 32k --concurrency 32 --prices prices.yaml -f json

    Exit status 1 when no GPU type asked for holds the workload.
    """

    from kvplan.cli.values import whole
    from kvplan.fit import fit, load_prices
    from kvplan.render.formats import check_format
    from kvplan.units import parse_count, parse_name_list

    fmt = fmt.lower()
    check_format("FitResult", fmt)
    if plot is not None:
        from kvplan.render.charts import check_path

        check_path(plot)  # a bad file name before minutes of planning
    result = fit(model, context=parse_count(context, "context"), concurrency=whole(concurrency, "concurrency"),
                 gpus=parse_name_list(gpus, "gpus") if gpus is not None else None,
                 engines=list(dict.fromkeys(parse_name_list(engine, "engine"))),
                 kv_dtypes=list(dict.fromkeys(parse_name_list(kv_dtype, "kv_dtype"))), engine_version=engine_version,
                 gpus_per_node=whole(gpus_per_node, "gpus_per_node") or 0,
                 prompt_len=parse_count(prompt_len, "prompt_len") if prompt_len is not None else None,
                 prices=load_prices(str(prices)) if prices is not None else None, catalog=gpu_catalog,
                 progress=_progress())
    _write(result, fmt)
    if plot is not None and result.rows:
        from kvplan.render.charts import fit_chart, save

        save(fit_chart(result), plot)
    if not result.rows:
        raise typer.Exit(1)


def _progress() -> Callable[[int, int], None] | None:
    """A progress line on stderr when it is a terminal (a sweep over the catalog takes seconds)."""
    import sys

    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\rkvplan fit: {done}/{total} GPU type x engine x dtype planned" + ("\n" if done == total
                                                                                              else ""))
        sys.stderr.flush()

    return show


def _write(result: object, fmt: str) -> None:
    import sys

    from kvplan.render.formats import write

    write(result, fmt, sys.stdout)
