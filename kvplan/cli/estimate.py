"""``kvplan estimate``: KV-cache footprint tables and sweeps.

The options are declared once, in ``options()``; the typer command is built from that table, and so is
the fast reader (``kvplan.cli.parse``) that runs plain invocations without importing typer. The engines'
layout settings join the table only where a flag needs them (``fast_options`` is read first).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.cli import options as o
from kvplan.cli.options import MODEL_HELP, Arg, Opt
from kvplan.record import once

NEUTRAL: tuple[Opt, ...] = (
    o.CONTEXT.but(help="Context lengths in tokens: 8192, 8k (k = 1024), lists 4k,32k, ranges 1k..128k (doubling) "
                  "or 1k..8k:1k (step). Default: 1k..max_position_embeddings."),
    o.BATCH.but(help="Concurrent sequences: 1,8,32 or 1..64 (doubling)."),
    o.KV_DTYPE,
)
"""The engine-neutral options before --engine; ``LATER`` after it. Each engine's layout settings follow them."""
LATER: tuple[Opt, ...] = (
    o.ENGINE_VERSION, o.BLOCK_SIZE, o.FORMAT,
    Opt("by_layer", ("--by-layer",), False, "Break every row down per layer.", flag=True),
    Opt("explain", ("--explain",), False, "Show the formula behind each number.", flag=True),
    Opt("plot", ("--plot",), False, "Draw KV size against context: in the terminal, or into a file when a .png or "
        ".svg name follows (--plot kv.svg; needs the plot extra: pip install \"kvplan[plot]\").", flag=True,
        file_dest="plot_file", file_suffixes=(".png", ".svg")),
    Opt("plot_file", ("--plot-file",), None, "Draw KV size against context into this file, .png or .svg (the same "
        "as --plot FILE)."),
    Opt("revision", ("--revision",), None,
        "Hugging Face Hub revision (branch, tag or commit) of MODEL; implies the Hub. Also MODEL@REV."),
    Opt("hub", ("--hub",), False, "Read MODEL from the Hugging Face Hub even when a bundled spec has its id.",
        flag=True),
    *o.SHARING,
)


ARGUMENT = Arg("model", MODEL_HELP)


@once
def fast_options() -> tuple[Opt, ...]:
    """The options no engine declares, --engine among them (its help from the registry, no engine imported)."""
    engine = o.engine_opt("Cache layout rules, one or a list to compare", several=True)
    return (*NEUTRAL, engine, *LATER)


@once
def options() -> tuple[Opt, ...]:
    """Every option of the command: the neutral ones, --engine, then the engines' layout settings."""
    return (*fast_options(), *o.setting_opts(o.engine_settings(estimate_only=True)))


def __getattr__(name: str) -> Any:
    if name == "OPTIONS":  # generated from the engines' tables on first use
        return options()
    if name == "FIELDS":
        return fields()
    raise AttributeError(name)


_FIELDS = {"contexts": "context", "batches": "batch", "kv_dtypes": "kv_dtype", "format": "fmt", "name": "model"}


def fields() -> dict[str, str]:
    """Library parameter (``kvplan.estimate``, ``load_model``, ``EngineOptions``) -> this command's parameter,
    where they differ."""
    return _FIELDS | o.setting_fields(o.engine_settings(estimate_only=True))


DOC = """KV-cache bytes per (batch, context, kv dtype): exact integers, with the formula and every assumption.

Examples:

  kvplan estimate meta-llama/Llama-3.1-8B --context 8k,32k,128k --batch 1,8,32 --kv-dtype bf16,fp8

  kvplan estimate ./my-model/config.json --engine vllm --by-layer --explain

  kvplan estimate deepseek-ai/DeepSeek-V3 --engine hf --engine-version 4.57

  kvplan estimate Qwen/Qwen3-32B --hub --revision main   # from the Hugging Face Hub

Sizes are in binary units (GiB = 2^30 bytes); `-f json` and `-f csv` are for scripts.
"""


def run(model: str, context: str | None, batch: str, kv_dtype: str, engine: str, engine_version: str | None,
        block_size: str | int | None, fmt: str, by_layer: bool, explain: bool, plot: bool, revision: str | None = None,
        hub: bool = False, prompt_len: str | None = None, output_len: str | None = None,
        shared_prefix: str | None = None, n: str | None = None, beam_width: str | None = None,
        speculative_method: str | None = None, num_speculative_tokens: str | None = None,
        speculative_model: str | None = None, plot_file: str | None = None, **cache_flags: Any) -> None:
    """Parse the values, compute, render: the whole command, shared by both parsers."""
    from kvplan.cli.values import sharing_args, whole
    from kvplan.estimate import EstimateResult, estimate
    from kvplan.render.formats import check_format
    from kvplan.sources.resolve import load_model
    from kvplan.units import parse_count_list, parse_name_list

    fmt = fmt.lower()
    check_format(EstimateResult, fmt)
    if plot_file is not None:
        from kvplan.render.charts import check_path

        check_path(plot_file)  # a bad name is said before any work
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
                        engine_options=cache_options(cache_flags), lazy=True, **sharing)
               for name in engines]
    if context is None and contexts is not None:
        from kvplan.record import replace

        note = f"contexts default to 1k..max_position_embeddings ({contexts[-1]:,}); choose with --context"
        results = [replace(r, assumptions=(*r.assumptions, note)) for r in results]
    _render(results, fmt, by_layer, explain, plot)
    if plot_file is not None:
        from kvplan.render.charts import estimate_chart, save

        save(estimate_chart(results), plot_file)


def cache_options(flags: dict[str, Any]) -> dict[str, Any] | None:
    """EngineOptions values from the engines' layout settings that were given (each read by its converter;
    an engine that lacks one refuses it in the library, by name)."""
    from kvplan.engines.settings import convert_given

    if not any(value not in (None, False) for value in flags.values()):
        return None  # none given: the engines' tables stay unread (the fast path imports no other engine)
    settings = [owned.setting for owned in o.engine_settings(estimate_only=True).values()]
    return convert_given(settings, flags, "options") or None


def _render(results: list[Any], fmt: str, by_layer: bool, explain: bool, plot: bool) -> None:
    import sys

    from kvplan.render.formats import write

    write(results, fmt, sys.stdout, by_layer=by_layer, explain=explain, plot=plot)
    if plot and fmt != "table":
        sys.stderr.write("kvplan: --plot draws only with --format table\n")
