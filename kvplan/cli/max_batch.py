"""``kvplan max-batch``: what a GPU deployment serves, by the chosen engine's memory rules.

The command is generated: its engine-neutral options are declared in ``NEUTRAL``, and every engine's own
flags come from the engine's table of settings (``kvplan/engines/<engine>/settings.py``); a flag given for an
engine that lacks it is refused by name from the same tables.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.cli import options as o
from kvplan.cli.options import Arg, Opt

NEUTRAL: tuple[Opt, ...] = (
    o.GPU, o.GPU_MEMORY, o.GPU_CATALOG,
    o.TP.but(help="Tensor-parallel size (default 1; --solve gpus keeps it when given)."),
    o.PP.but(help="Pipeline-parallel size (default 1; --solve gpus keeps it when given)."),
    Opt("dp", ("--dp",), None, "Data-parallel ranks (default 1), each with its own KV cache for its own requests."),
    Opt("gpus_per_node", ("--gpus-per-node",), None, "--solve gpus: GPUs a node holds (default 8): tp is searched "
        "within a node, pipeline stages across nodes."),
    o.ENGINE_VERSION,
    o.KV_DTYPE.but(dest="kv_cache_dtype", names=("--kv-cache-dtype", "--kv-dtype"),
                   help="KV cache dtype (auto, fp8, ...)."),
    Opt("max_model_len", ("--max-model-len",), None, "Longest request (default: the model's limit). Read as the "
        "engines read it: 32k = 32,000, 32K = 32,768."),
    o.CONTEXT.but(help="Context for the max batch (default: --max-model-len)."),
    o.BATCH.but(help="Batch for the max context."),
    Opt("solve", ("--solve",), "batch", "batch, context, gpus (the fewest GPUs for --concurrency) or utilization "
        "(the least memory fraction holding --concurrency, else --batch)."),
    Opt("concurrency", ("--concurrency",), None, "Target concurrent sequences for --solve gpus (requests of n "
        "with --n or --beam-width)."),
    o.BLOCK_SIZE.but(help="Engine page size in tokens."),
    Opt("kv_cache_memory", ("--kv-cache-memory",), None, "KV memory per GPU as the engine logged it (e.g. "
        "30.5GiB): skips the budget estimate."),
    Opt("weights_bytes", ("--weights-bytes",), None, "Weights per GPU, e.g. 14.99GiB (default: the checkpoint / "
        "ranks)."),
    o.SHARED_PREFIX.but(help="Leading tokens common to every request (a system prompt): the larger batch the "
                        "engine's sharing allows."),
    o.N.but(help="Parallel samples per request (default 1, at most 16,384), e.g. 4: --batch, the max batch and "
            "--concurrency count requests of n sequences (vLLM, SGLang, transformers)."),
    o.BEAM_WIDTH.but(help="Beams per request (default 1), counted as --n (vLLM, TensorRT-LLM, transformers); "
                     "not with --n."),
    o.PROMPT_LEN.but(help="The prompt part of --context that samples or beams share (default: all of it)."),
    o.SPECULATIVE_METHOD, o.NUM_SPECULATIVE_TOKENS, o.SPECULATIVE_MODEL.but(help="The draft model or EAGLE head."),
    o.FORMAT.but(help="table, json, csv or markdown."),
    Opt("plot", ("--plot",), None, "Also draw the GPU as each engine divides it, and the sequences each fits against "
        "context, into this file, .png or .svg (needs "
        "the plot extra: pip install \"kvplan[plot]\")."),
    Opt("calibration", ("--calibration",), None, "A calibration file (`kvplan log --save`): plan from the items "
        "the engine measured, when model, GPU and engine version match.", path=True),
)
"""The engine-neutral options; --engine is generated from the registry (``options.engine_opt``)."""

_NEUTRAL_FIELDS = {"kv_dtype": "kv_cache_dtype", "catalog": "gpu_catalog", "kv_cache_memory_bytes": "kv_cache_memory",
                   "name": "model", "format": "fmt"}

DOC = """How many concurrent sequences fit (or how long a context, or how many GPUs) under an engine's memory rules.

    Examples:

      kvplan max-batch meta-llama/Llama-3.1-70B --gpu H100-80GB --tp 4 --max-model-len 32k

      kvplan max-batch deepseek-ai/DeepSeek-V3 --gpu H200 --tp 8 --kv-cache-dtype fp8

      kvplan max-batch Qwen/Qwen3-8B --gpu RTX-4090 --engine sglang --solve context --batch 16

      kvplan max-batch Qwen/Qwen3-14B --gpu A100-80GB --kv-cache-memory 30.5GiB

      kvplan max-batch meta-llama/Llama-3.1-8B --gpu H100 -c 5k --prompt-len 4k --n 4 --shared-prefix 2k

    Exit status 1 when not even one sequence of --max-model-len (or request of --n samples) fits: the message says why.
    """


def __getattr__(name: str) -> Any:
    if name == "FIELDS":  # generated from the engines' tables on first use (after an error, or by a test)
        return fields()
    raise AttributeError(name)


def fields() -> dict[str, str]:
    """Library parameter (``kvplan.max_batch``, ``Settings``, ``EngineOptions``) -> this command's parameter,
    where they differ."""
    return _NEUTRAL_FIELDS | o.setting_fields(o.engine_settings())


def options() -> tuple[Opt, ...]:
    """Every option: the neutral ones, --engine, then each engine's settings (union of the tables)."""
    engine = o.engine_opt("One engine, or several to compare (one plan each)", several=True)
    return (*NEUTRAL[:7], engine, *NEUTRAL[7:], *o.setting_opts(o.engine_settings()))


ARGUMENT = Arg("model", "Bundled model id, config.json, model directory or YAML spec.")


def run(model: str, **values: Any) -> int:
    """Parse the values, plan each engine, render, and exit 1 where nothing fits."""
    import sys

    from kvplan.errors import UsageError
    from kvplan.plan import CapacityPlan
    from kvplan.render.formats import check_format, write
    from kvplan.units import parse_name_list

    fmt = values["fmt"].lower()
    check_format(CapacityPlan, fmt)
    engines = list(dict.fromkeys(parse_name_list(values["engine"], "engine")))
    if len(engines) > 1 and values["calibration"] is not None:  # a calibration file is one engine's measurements
        raise UsageError("a calibration file calibrates one engine: give one --engine with it", field="calibration")
    table = o.engine_settings()
    from kvplan.engines import get_engine

    for name in engines:  # a flag of another engine is refused before anything is read
        o.refuse_foreign(get_engine(name), table, values)
    if values.get("plot") is not None:
        from kvplan.render.charts import check_path

        check_path(values["plot"])
    planner = _Planner(model, values, table)
    plans = [planner.plan(name) for name in engines]
    calibrated = planner.calibrated
    write(plans, fmt, sys.stdout, calibration=None if calibrated is None else
          {"file": str(values["calibration"]), "items": list(calibrated.used)})
    if values.get("plot") is not None:
        from kvplan.render.charts import budget_chart, save

        save(budget_chart(plans), values["plot"])
    return _verdict(plans, values["solve"])


class _Planner:
    """The values read once, then one plan per engine (each with its own model reading and calibration)."""

    def __init__(self, model: str, values: dict[str, Any], table: dict[str, Any]) -> None:
        from kvplan.cli.values import engine_int, whole
        from kvplan.engines.settings import convert_given

        self.model, self.values, self.table = model, values, table
        self.settings = _settings(values, [owned.setting for owned in table.values()])
        self.mml = engine_int(values["max_model_len"], "max_model_len")
        self.tp, self.pp, self.dp = (whole(values[k], k) for k in ("tp", "pp", "dp"))  # None: default, or searched
        self.ranks = (1 if self.tp is None else self.tp) * (1 if self.pp is None else self.pp)
        per_node = values["gpus_per_node"]
        self.node: dict[str, Any] = {} if per_node is None else {"gpus_per_node": whole(per_node, "gpus_per_node")}
        settings = [owned.setting for owned in table.values()]
        self.plan_args: dict[str, Any] = convert_given(settings, values, "plan")
        self.engine_options = convert_given(settings, values, "options")
        self.gpu, self.gpu_memory, self.engine_version = values["gpu"], values["gpu_memory"], values["engine_version"]
        self.calibrated: Any = None

    def plan(self, name: str) -> Any:
        from kvplan.engines import get_engine
        from kvplan.engines.settings import combine

        engine = get_engine(name)
        options = {**self.engine_options, **combine(engine, self.values, self.ranks)}
        if self.values["calibration"] is not None:
            self._calibrate(name)
        loaded, engine_notes = _engine_model(self.model, engine, self.engine_version, self.values, self.mml)
        result = self._max_batch(loaded, name, options)
        if self.calibrated is not None or engine_notes:
            from kvplan.record import replace

            result = replace(result, assumptions=(*(self.calibrated.notes if self.calibrated is not None else ()),
                                                  *engine_notes, *result.assumptions))
        return result

    def _calibrate(self, engine: str) -> None:
        from kvplan.calibrate import calibrate
        from kvplan.logs.calibration import load

        cal = load(self.values["calibration"])
        if self.gpu is None and self.gpu_memory is None and cal.gpu.total_bytes:
            self.gpu_memory = str(cal.gpu.total_bytes)
        self.calibrated = calibrate(cal, self.model, gpu=self.gpu, gpu_memory=self.gpu_memory,
                                    tp=1 if self.tp is None else self.tp, pp=1 if self.pp is None else self.pp,
                                    engine=engine, engine_version=self.engine_version,
                                    kv_dtype=self.values["kv_cache_dtype"], max_model_len=self.mml,
                                    settings=self.settings, catalog=self.values["gpu_catalog"])
        self.settings, self.engine_version = self.calibrated.settings, self.calibrated.engine_version
        if self.calibrated.gpu_memory:
            self.gpu, self.gpu_memory = None, self.calibrated.gpu_memory

    def _max_batch(self, loaded: Any, engine: str, options: dict[str, Any]) -> Any:
        from kvplan.cli.values import per_request_count, prefix_count, whole
        from kvplan.plan import max_batch
        from kvplan.units import parse_count

        v = self.values
        return max_batch(
            loaded, gpu=self.gpu, gpu_memory=self.gpu_memory, catalog=v["gpu_catalog"], tp=self.tp, pp=self.pp,
            dp=self.dp, engine=engine, **self.plan_args, **self.node,  # no expert_parallel: the engine's way
            engine_version=self.engine_version, kv_dtype=v["kv_cache_dtype"], max_model_len=self.mml,
            context=parse_count(v["context"], "context") if v["context"] is not None else None,
            batch=whole(v["batch"], "batch"), block_size=whole(v["block_size"], "block_size"),
            settings=self.settings, solve=v["solve"], concurrency=whole(v["concurrency"], "concurrency"),
            shared_prefix=prefix_count(v["shared_prefix"]),
            # 0 reaches the library, which refuses it by field (``or 1`` would hide it)
            n=per_request_count(v["n"], "n"), beam_width=per_request_count(v["beam_width"], "beam_width"),
            prompt_len=parse_count(v["prompt_len"], "prompt_len") if v["prompt_len"] is not None else None,
            speculative_method=v["speculative_method"],
            num_speculative_tokens=whole(v["num_speculative_tokens"], "num_speculative_tokens"),
            speculative_model=v["speculative_model"], engine_options=options or None,
        )


def _settings(values: dict[str, Any], settings: list[Any]) -> Any:
    """The GPU budget's settings: the neutral sizes and every engine setting given for it."""
    from kvplan.budgets import Settings
    from kvplan.engines.settings import convert_given
    from kvplan.hardware import parse_bytes

    given = convert_given(settings, values, "settings")
    for name, field in (("kv_cache_memory", "kv_cache_memory_bytes"), ("weights_bytes", "weights_bytes")):
        if values[name] is not None:
            given[field] = parse_bytes(values[name], name)
    return Settings(**given)


def _verdict(plans: list[Any], solve: str) -> int:
    """Exit status 1, each engine's reason on stderr, where not one sequence fits."""
    import sys

    if solve == "context" and all(p.max_context > 0 for p in plans):
        return 0  # the question was the longest context: answered, whatever max-model-len asks
    unfit = [p for p in plans if not p.fits and not (solve == "context" and p.max_context > 0)]
    if unfit:
        for p in unfit:
            who = f" ({p.engine})" if len(plans) > 1 else ""
            sys.stderr.write(f"kvplan: does not fit{who}: {_short_pool_message(p) or p.message}\n")
        return 1
    return 0


def _engine_model(model: str, engine: Any, engine_version: str | None, values: dict[str, Any],
                  max_model_len: int | None) -> tuple[object, tuple[str, ...]]:
    """The model as the engine loads it under its model settings (--quantization, --dtype, ...), and whether the
    engine starts with the --max-model-len given (the engine's own rule, ``ServeFlags.model_reader``): the spec
    to plan (the name where the engine has no such rule) and the notes to show. An engine that refuses to start
    is a usage error naming the flag (exit 2)."""
    from kvplan.engines.settings import settings_of
    from kvplan.errors import UsageError

    serve = engine.serve
    reader = serve.model_reader if serve is not None else None
    if reader is None:
        return model, ()
    from kvplan.sources.resolve import load_model

    spec = load_model(model)
    # the settings the engine reads from its flags and environment (engines/<e>/flags.py read_model)
    given = [s for s in settings_of(engine) if s.given(values.get(s.name))]
    read: dict[str, object] = {s.dest: s.value(values[s.name]) for s in given if s.target == "model"}
    if max_model_len is not None:
        read["max_model_len"] = max_model_len
    env = [s for s in settings_of(engine) if s.target == "env"]
    read.update({name: s.value(values[s.name]) for s in given if s.target == "env" for name in s.serve})
    loaded, remarks = reader(spec, read, engine_version)

    def ours(text: str) -> str:  # this command's flag where the deployment would set the variable
        for s in env:
            for name in s.serve:
                text = text.replace(f"set {name}=1", f"give {s.flag}").replace(f"{name}=1", s.flag)
        return text

    for r in remarks:
        if r.severity == "error":
            raise UsageError(ours(r.message), field=r.setting)
    return loaded, tuple(ours(r.message) for r in remarks)


def _short_pool_message(plan: object) -> str:
    """What the engine does when not one request of --max-model-len fits its pool, where it still starts
    (SGLang caps requests: ``ServeFlags.short_pool``); empty otherwise (the plan's own message says why)."""
    from kvplan.engines.serve import serve_flags

    serve = serve_flags(str(getattr(plan, "engine")))
    if serve is None or serve.short_pool is None or getattr(plan, "misfit", ""):
        return ""
    remark = serve.short_pool(int(getattr(plan, "kv_cache_tokens")), int(getattr(plan, "max_model_len")), {})
    return remark.message if remark is not None and remark.severity != "error" else ""
