"""``kvplan estimate``: KV-cache footprint tables and sweeps.

The options are declared once, in ``OPTIONS``; the typer command is built from that table, and so is
the fast path (``parse_fast``) that runs plain invocations without importing typer, which costs
more than the estimate itself (docs/performance.md). Anything the fast parser is unsure of goes to
typer, and tests/test_cli_fastpath.py holds both paths to the same output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvplan.render import FORMATS


@dataclass(frozen=True)
class Opt:
    dest: str
    """The command's parameter name (``run``'s keyword)."""
    names: tuple[str, ...]
    default: Any
    help: str
    flag: bool = False
    """A switch without a value; every other option takes text, which ``run`` converts."""


OPTIONS: tuple[Opt, ...] = (
    Opt("context", ("--context", "-c"), None,
        "Context lengths in tokens: 8192, 8k (k = 1024), lists 4k,32k, ranges 1k..128k (doubling) or "
        "1k..8k:1k (step). Default: 1k..max_position_embeddings."),
    Opt("batch", ("--batch", "-b"), "1", "Concurrent sequences: 1,8,32 or 1..64 (doubling)."),
    Opt("kv_dtype", ("--kv-dtype", "-d"), "auto",
        "KV cache dtypes, comma separated: auto (the engine's default), bf16, fp16, fp32, fp8, fp8_e5m2, "
        "int8_per_token_head, fp8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla (vLLM, MLA), "
        "q8_0, q4_0, ... (llama.cpp)."),
    Opt("engine", ("--engine", "-e"), "vllm",
        "Cache layout rules, one or a list to compare (vllm,sglang): vllm, sglang, trtllm, llamacpp, "
        "hf (transformers DynamicCache) or hf-static (StaticCache)."),
    Opt("engine_version", ("--engine-version",), None,
        "Which release's rules apply, e.g. 0.10 (vLLM) or 4.57 (transformers). Default: the newest kvplan knows."),
    Opt("block_size", ("--block-size",), None, "Override the engine's page size in tokens."),
    # transformers' QuantizedCache and eviction budgets (hf engine; docs/quantized-eviction.md)
    Opt("kv_cache", ("--kv-cache",), None, "quantized: transformers' QuantizedCache (hf)."),
    Opt("backend", ("--backend",), None, "QuantizedCache backend: quanto (default), hqq, fp8."),
    Opt("nbits", ("--nbits",), None, "Quantized bits: quanto 2 or 4 (default 4), hqq 1, 2, 3, 4 or 8."),
    Opt("residual_length", ("--residual-length",), None,
        "Decoded tokens kept in full precision until re-quantization (default 128)."),
    Opt("q_group_size", ("--q-group-size",), None, "Elements per scale and zero point (default 64)."),
    Opt("axis_key", ("--axis-key",), None, "Grouping axis for keys (quanto 0 or -1, hqq 0 or 1; default 0)."),
    Opt("axis_value", ("--axis-value",), None, "Grouping axis for values (default 0)."),
    Opt("evict", ("--evict",), None,
        "Token budget per full-attention layer: sink=4,window=4092 (StreamingLLM) or heavy=H,recent=R (H2O)."),
    Opt("press", ("--press",), None, "NVIDIA kvpress press at prefill: snapkv, knorm, pyramidkv, adakv, ..."),
    Opt("compression_ratio", ("--compression-ratio",), None, "The press's fraction of prompt tokens removed."),
    Opt("fmt", ("--format", "-f"), "table", f"Output format: {', '.join(FORMATS)}."),
    Opt("by_layer", ("--by-layer",), False, "Break every row down per layer.", flag=True),
    Opt("explain", ("--explain",), False, "Show the formula behind each number.", flag=True),
    Opt("plot", ("--plot",), False, "Draw KV size against context (terminal chart).", flag=True),
    Opt("revision", ("--revision",), None,
        "Hugging Face Hub revision (branch, tag or commit) of MODEL; implies the Hub. Also MODEL@REV."),
    Opt("hub", ("--hub",), False, "Read MODEL from the Hugging Face Hub even when a bundled spec has its id.",
        flag=True),
    Opt("scheduling", ("--scheduling",), None,
        "vLLM: async (two batches in flight, the default from about 0.12) or sync; sliding and chunked layers "
        "free their blocks one step later under async."),
    Opt("swa_full", ("--swa-full",), False, "llama.cpp: a full-size cache for sliding-window layers.", flag=True),
    Opt("prompt_len", ("--prompt-len",), None, "Prompt tokens per request (context = prompt + output), e.g. 6k."),
    Opt("output_len", ("--output-len",), None, "Generated tokens per request, e.g. 2k."),
    Opt("shared_prefix", ("--shared-prefix",), None,
        "Leading prompt tokens common to every request (a system prompt), e.g. 4k, stored as the engine shares "
        "them (default 0: none)."),
    Opt("n", ("--n",), None, "Parallel samples per request (default 1), e.g. 4; --batch counts requests "
        "(vLLM, SGLang, transformers)."),
    Opt("beam_width", ("--beam-width",), None, "Beams per request (default 1); --batch counts requests "
        "(vLLM, TensorRT-LLM, transformers); not with --n."),
    Opt("speculative_method", ("--speculative-method",), None,
        "Speculative decoding (vLLM, SGLang, TensorRT-LLM, transformers): ngram, eagle, eagle3, mtp or "
        "draft_model (default with --speculative-model: from its name, as vLLM infers it)."),
    Opt("num_speculative_tokens", ("--num-speculative-tokens",), None,
        "Draft tokens per step (k), e.g. 5; needed except with mtp (default: the MTP layer count)."),
    Opt("speculative_model", ("--speculative-model",), None,
        "The draft model or EAGLE head (bundled id, config.json, directory or YAML spec)."),
)
FIELDS = {"contexts": "context", "batches": "batch", "kv_dtypes": "kv_dtype", "format": "fmt", "name": "model"}
"""Library parameter (``kvplan.estimate``, ``load_model``) -> this command's parameter, where they differ."""


def flags() -> dict[str, str]:
    """Library field -> flag, for one-line errors (the same table the typer command is built from)."""
    table = {opt.dest: opt.names[0] for opt in OPTIONS} | {"model": "MODEL"}
    return table | {field: table[dest] for field, dest in FIELDS.items()}


MODEL_HELP = ("Bundled model id (e.g. meta-llama/Llama-3.1-8B), a config.json, a model directory, a YAML spec, "
              "or any Hugging Face Hub model id (org/name or org/name@revision; read from config.json and the "
              "safetensors headers, cached for HF_HUB_OFFLINE=1).")
DOC = """KV-cache bytes per (batch, context, kv dtype): exact integers, with the formula and every assumption.

Examples:

  kvplan estimate meta-llama/Llama-3.1-8B --context 8k,32k,128k --batch 1,8,32 --kv-dtype bf16,fp8

  kvplan estimate ./my-model/config.json --engine vllm --by-layer --explain

  kvplan estimate deepseek-ai/DeepSeek-V3 --engine hf --engine-version 4.57

  kvplan estimate Qwen/Qwen3-32B --hub --revision main   # from the Hugging Face Hub
"""


def run(model: str, context: str | None, batch: str, kv_dtype: str, engine: str, engine_version: str | None,
        block_size: str | int | None, fmt: str, by_layer: bool, explain: bool, plot: bool, revision: str | None = None,
        hub: bool = False, prompt_len: str | None = None, output_len: str | None = None,
        shared_prefix: str | None = None, n: str | None = None, beam_width: str | None = None,
        speculative_method: str | None = None, num_speculative_tokens: str | None = None,
        speculative_model: str | None = None, **cache_flags: Any) -> None:
    """Parse the values, compute, render: the whole command, shared by both parsers."""
    from kvplan.cli.values import sharing_args, whole
    from kvplan.estimate import EstimateResult, estimate
    from kvplan.render.formats import check_format
    from kvplan.sources.resolve import load_model
    from kvplan.units import parse_count_list, parse_name_list

    fmt = fmt.lower()
    check_format(EstimateResult, fmt)
    engines = list(dict.fromkeys(parse_name_list(engine, "engine")))
    size = whole(block_size, "block_size")
    spec = load_model(model, revision=revision, hub=hub)
    batches = parse_count_list(batch, "batch")
    dtypes = parse_name_list(kv_dtype, "kv_dtype")
    sharing = sharing_args(prompt_len, output_len, shared_prefix, n, beam_width, speculative_method,
                           num_speculative_tokens, speculative_model)
    if context is None and (sharing["prompt_len"] or sharing["output_len"]):
        contexts = None
    elif context is None:
        top = spec.max_position_embeddings or 8192
        contexts = parse_count_list(f"1k..{top}", "context") if top > 1024 else [top]
    else:
        contexts = parse_count_list(context, "context")
    results = [estimate(spec, contexts=contexts, batches=batches, kv_dtypes=dtypes, engine=name,
                        engine_version=engine_version, block_size=size, by_layer=by_layer,
                        engine_options=cache_options(cache_flags), **sharing)
               for name in engines]
    if context is None and contexts is not None:
        from dataclasses import replace

        note = f"contexts default to 1k..max_position_embeddings ({contexts[-1]:,}); choose with --context"
        results = [replace(r, assumptions=(*r.assumptions, note)) for r in results]
    _render(results, fmt, by_layer, explain, plot)


def cache_options(flags: dict[str, Any]) -> dict[str, Any] | None:
    """EngineOptions values from the quantized-cache and eviction flags that were given."""
    from kvplan.cli.values import whole
    from kvplan.errors import UsageError

    given = {name: value for name, value in flags.items() if value is not None}
    if "evict" in given:
        from kvplan.engines.hf.eviction import parse_evict

        given["evict"] = parse_evict(given["evict"])
    if "compression_ratio" in given:
        try:
            given["compression_ratio"] = float(given["compression_ratio"])
        except ValueError:
            raise UsageError(f"'{given['compression_ratio']}' is not a number",
                             field="compression_ratio") from None
    for name in ("nbits", "residual_length", "q_group_size", "axis_key", "axis_value"):
        if name in given:
            given[name] = whole(given[name], name)
    if not given.get("swa_full", True):
        del given["swa_full"]  # a switch left off
    if "scheduling" in given:
        mode = str(given.pop("scheduling")).strip().lower()
        if mode not in ("async", "sync"):
            raise UsageError(f"'{mode}': choose async or sync", field="scheduling")
        given["async_scheduling"] = mode == "async"
    if "kv_cache" in given:
        given["kv_cache"] = given["kv_cache"].strip().lower()
    if "backend" in given:
        given["backend"] = given["backend"].strip().lower()
    return given or None


def _render(results: list[Any], fmt: str, by_layer: bool, explain: bool, plot: bool) -> None:
    import sys

    from kvplan.render.formats import write

    write(results, fmt, sys.stdout, by_layer=by_layer, explain=explain, plot=plot)
    if plot and fmt != "table":
        sys.stderr.write("kvplan: --plot draws only with --format table\n")


def parse_fast(args: list[str]) -> dict[str, Any] | None:
    """Values for ``run`` from the arguments after 'estimate', or None to leave them to typer.

    A thin reader of ``OPTIONS``, the table the typer command is built from: it accepts what click
    accepts for these options (``--opt value``, ``--opt=value``, ``-o value``, ``-ovalue``, flags, the
    last repeat winning) and gives up on anything else (help, unknown or incomplete options, a missing
    or second MODEL), which typer then reports. Values stay text: ``run`` converts them for both.
    """
    by_name = {name: opt for opt in OPTIONS for name in opt.names}
    values: dict[str, Any] = {opt.dest: opt.default for opt in OPTIONS}
    model: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            if model is not None:
                return None
            model = arg
            continue
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        opt = by_name.get(name)
        if opt is None:
            return None
        if opt.flag:
            if eq or inline:
                return None
            values[opt.dest] = True
            continue
        if eq or inline:
            value = inline
        elif i < len(args):
            value, i = args[i], i + 1
        else:
            return None
        values[opt.dest] = value
    if model is None:
        return None
    return {"model": model, **values}


def command() -> Callable[..., None]:
    """The typer command, its options built from ``OPTIONS``."""

    import typer

    o = {opt.dest: typer.Option(opt.default, *opt.names, help=opt.help, show_default=opt.default is not None)
         for opt in OPTIONS}

    def estimate_command(
        model: str = typer.Argument(..., help=MODEL_HELP, show_default=False),
        context: str | None = o["context"],
        batch: str = o["batch"],
        kv_dtype: str = o["kv_dtype"],
        engine: str = o["engine"],
        engine_version: str | None = o["engine_version"],
        block_size: str | None = o["block_size"],
        fmt: str = o["fmt"],
        by_layer: bool = o["by_layer"],
        explain: bool = o["explain"],
        plot: bool = o["plot"],
        revision: str | None = o["revision"],
        hub: bool = o["hub"],
        prompt_len: str | None = o["prompt_len"],
        output_len: str | None = o["output_len"],
        shared_prefix: str | None = o["shared_prefix"],
        n: str | None = o["n"],
        beam_width: str | None = o["beam_width"],
        speculative_method: str | None = o["speculative_method"],
        num_speculative_tokens: str | None = o["num_speculative_tokens"],
        speculative_model: str | None = o["speculative_model"],
        kv_cache: str | None = o["kv_cache"],
        backend: str | None = o["backend"],
        nbits: str | None = o["nbits"],
        residual_length: str | None = o["residual_length"],
        q_group_size: str | None = o["q_group_size"],
        axis_key: str | None = o["axis_key"],
        axis_value: str | None = o["axis_value"],
        evict: str | None = o["evict"],
        press: str | None = o["press"],
        compression_ratio: str | None = o["compression_ratio"],
        scheduling: str | None = o["scheduling"],
        swa_full: bool = o["swa_full"],
    ) -> None:
        run(model, context, batch, kv_dtype, engine, engine_version, block_size, fmt, by_layer, explain, plot,
            revision, hub, prompt_len, output_len, shared_prefix, n, beam_width, speculative_method,
            num_speculative_tokens, speculative_model, kv_cache=kv_cache, backend=backend, nbits=nbits,
            residual_length=residual_length, q_group_size=q_group_size, axis_key=axis_key, axis_value=axis_value,
            evict=evict, press=press, compression_ratio=compression_ratio, scheduling=scheduling, swa_full=swa_full)

    estimate_command.__doc__ = DOC
    return estimate_command


typer_command = command
