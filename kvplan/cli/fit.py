"""``kvplan fit``: which GPUs, how many, at what cost, and the command that deploys each (docs/fit.md)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.cli import options as o
from kvplan.cli.options import Arg, Opt

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

FIELDS = {"gpus": "gpus", "engines": "engine", "kv_dtypes": "kv_dtype", "catalog": "gpu_catalog", "name": "model",
          "format": "fmt"}
"""Library parameter (``kvplan.fit``) -> this command's parameter, where they differ."""

ARGUMENT = Arg("model", "Bundled model id, config.json, model directory or YAML spec.")


def options() -> tuple[Opt, ...]:
    return (
        Opt("context", ("--context", "-c"), None, "Tokens per sequence (its max-model-len), e.g. 32k (k = 1024).",
            required=True),
        Opt("concurrency", ("--concurrency",), None, "Sequences of --context served at once, e.g. 64.",
            required=True),
        Opt("gpus", ("--gpus",), None, "GPU types to rank, e.g. H100,H200,MI300X (default: every GPU in `kvplan "
            "gpus`, or every GPU priced in --prices)."),
        o.engine_opt("Engines to compare", several=True),
        Opt("kv_dtype", ("--kv-dtype", "--kv-cache-dtype"), "auto", "KV dtypes to compare, e.g. auto,fp8."),
        o.ENGINE_VERSION.but(help="Which release's rules (default: the newest kvplan knows)."),
        Opt("gpus_per_node", ("--gpus-per-node",), "8", "GPUs a node holds: tp within a node, pipeline stages "
            "across nodes."),
        Opt("prompt_len", ("--prompt-len",), None, "Prompt tokens of a request, for the time-to-first-token bound "
            "(default: the context)."),
        Opt("prices", ("--prices",), None, "Your $/GPU-hour (YAML or JSON; `kvplan schema prices`): rows sorted "
            "by $/hour, with $ per million output tokens.", path=True),
        o.GPU_CATALOG,
        Opt("plot", ("--plot",), None, "Also draw GPUs (or $/hour) per GPU type into this file: .png or .svg."),
        Opt("fmt", ("--format", "-f"), "table", "table, json, csv or markdown."),
        Opt("beside", ("--beside",), None, "A second model on the same GPUs as each row: whether it fits there, "
            "both at their least memory fraction (docs/shared-gpu.md)."),
        Opt("beside_context", ("--beside-context",), None, "Tokens per sequence of the --beside model (default: "
            "--context)."),
        Opt("beside_concurrency", ("--beside-concurrency",), "1", "Sequences of the --beside model served at once, "
            "over each row's replicas."),
    )


DOC = """The smallest deployment of each GPU type that holds a workload, by each engine's own memory rules.

    Each row: GPUs (tp x pp x dp), the KV tokens and concurrency it holds (what `kvplan max-batch` prints for
    that deployment), the KV memory left over, the decode-step and time-to-first-token bounds, your prices, and
    the command that starts it. docs/fit.md explains the bounds and the prices file.

    Examples:

      kvplan fit meta-llama/Llama-3.1-70B --context 32k --concurrency 64

      kvplan fit deepseek-ai/DeepSeek-V3 -c 16k --concurrency 128 -e vllm,sglang --kv-dtype bf16,fp8 --gpus H100,H200,B200,MI300X

      kvplan fit Qwen/Qwen3-235B-A22B -c 32k --concurrency 32 --prices prices.yaml -f json

      kvplan fit Qwen/Qwen3-8B -c 32k --concurrency 4 --beside Qwen/Qwen3-0.6B --beside-concurrency 8

    Exit status 1 when no GPU type asked for holds the workload.
    """


def run(model: str, context: str, concurrency: str, gpus: str | None, engine: str, kv_dtype: str,
        engine_version: str | None, gpus_per_node: str, prompt_len: str | None, prices: Any, gpu_catalog: Any,
        plot: str | None, fmt: str, beside: str | None = None, beside_context: str | None = None,
        beside_concurrency: str = "1") -> int:
    """Rank the deployments; 1 where no GPU type holds the workload."""
    from kvplan.cli.values import whole
    from kvplan.fit import Beside, fit, load_prices
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
                 progress=_progress(),
                 beside=Beside(beside, parse_count(beside_context or context, "beside_context"),
                               whole(beside_concurrency, "beside_concurrency") or 0) if beside is not None else None)
    _write(result, fmt)
    if plot is not None and result.rows:
        from kvplan.render.charts import fit_chart, save

        save(fit_chart(result), plot)
    return 0 if result.rows else 1


def _progress() -> Callable[[int, int], None] | None:
    """A progress line on stderr when it is a terminal (a sweep over the catalog takes seconds)."""
    from kvplan.cli.progress import progress_line

    return progress_line("fit", "GPU type x engine x dtype planned")


def _write(result: object, fmt: str) -> None:
    import sys

    from kvplan.render.formats import write

    write(result, fmt, sys.stdout)
