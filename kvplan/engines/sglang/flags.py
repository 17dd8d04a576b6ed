"""``python -m sglang.launch_server`` flags (``python/sglang/srt/server_args.py``)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from collections.abc import Mapping

from kvplan.engines.serve_format import ServeFlags, ServeReading, ServeRemark, loaded_with_remark, shown
from kvplan.errors import UsageError

# --speculative-algorithm -> kvplan's method (``SpeculativeAlgorithm``; NEXTN is SGLang's MTP)
_METHODS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "STANDALONE": "draft_model", "NGRAM": "ngram"}
_DRAFTLESS = frozenset({"mtp", "ngram"})


def read_serve(settings: Mapping[str, Any], version: str | None) -> ServeReading:
    """The hierarchical cache, the radix cache and speculation from the settings the flags gave.

    ``ServerArgs``: ``--enable-hierarchical-cache`` (store_true) turns the host pool on; ``--hicache-ratio``
    (float, default 2.0) and ``--hicache-size`` (int GB per rank, 0 = use the ratio) size it and do nothing
    without it. ``--disable-radix-cache`` turns prefix sharing off. ``--speculative-algorithm``: planned
    (``read_speculation``); a tree wider than one (``--speculative-eagle-topk`` > 1) or steps left to
    SGLang's choice are said. ``--cpu-offload-gb`` (an int, GiB of weights per GPU in host memory:
    ``OffloaderV1(cpu_offload_max_bytes=int(gb x 1024**3))``, ``offloader.py``) is planned by the budget.
    """
    options: dict[str, Any] = {}
    remarks: list[ServeRemark] = []
    sizing = [k for k in ("hicache_ratio", "hicache_size") if k in settings]
    if settings.get("enable_hierarchical_cache"):
        size = settings.get("hicache_size")
        if size:  # 0 (the default) means: size the pool by the ratio
            options["hicache_size_gb"] = float(size)
        else:
            options["hicache_ratio"] = float(settings.get("hicache_ratio", 2.0))
    elif sizing:
        remarks.append(ServeRemark("note", "not-read", f"--{sizing[0].replace('_', '-')} without "
                                   "--enable-hierarchical-cache: SGLang keeps no host KV pool", sizing[0]))
    sharing = not settings.get("disable_radix_cache")
    if not sharing:
        remarks.append(ServeRemark("note", "prefix-caching", "--disable-radix-cache: requests share no KV, a shared "
                                   "prefix is stored once per request", "disable_radix_cache"))
    remarks.extend(speculation_remarks(settings))
    budget: dict[str, Any] = {}
    gb = _whole_gib(settings.get("cpu_offload_gb"))
    if gb:
        budget["cpu_offload_bytes"] = gb * 1024**3
    parallel, per_rank, dp_remarks = dp_attention(settings)
    budget.update(per_rank)
    remarks.extend(dp_remarks)
    return ServeReading(engine_options=tuple(sorted(options.items())), settings=tuple(sorted(budget.items())),
                        sharing=sharing, remarks=tuple(remarks), parallel=parallel)


def _count(settings: Mapping[str, Any], key: str, flag: str) -> int | None:
    """A parallel size as SGLang's argparse reads it (``type=int``): a whole number from 1, else refused by name."""
    value = settings.get(key)
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit() and len(text) <= 7) or int(text) < 1:
        raise UsageError(f"{flag} {shown(str(value), quote=False)}: SGLang takes a whole number from 1", field=key)
    return int(text)


def dp_attention(settings: Mapping[str, Any]) -> tuple[tuple[tuple[str, Any], ...], dict[str, Any], list[ServeRemark]]:
    """``--enable-dp-attention`` with ``--dp-size``, and ``--ep-size``: (max_batch's parallel keywords, budget
    settings per rank, remarks).

    ``ServerArgs._handle_data_parallelism`` (server_args.py): dp 1 turns DP attention off; otherwise it asserts
    tp % dp == 0. ``layers/dp_attention.py`` ``compute_dp_attention_world_info``: attention (and its KV cache, one
    pool per DP rank) runs over attn_tp = tp / dp ranks, while the MoE layers keep the whole tp group (``--ep-size``
    only chooses expert- or tensor-sharding of the experts within it: moe_tp x ep = tp), so the world is tp x pp
    GPUs, not tp x dp. ``--max-running-requests`` is the whole group's: each DP rank admits
    max_running_requests // dp (``model_runner`` sizes its req_to_token_pool so, SGLang PR #20063). Without DP
    attention, ``--dp`` starts dp whole replicas of tp GPUs each (``data_parallel_controller.py``)."""
    tp = _count(settings, "tp", "--tp-size") or 1
    dp = _count(settings, "dp", "--dp-size") or 1
    ep = _count(settings, "ep_size", "--ep-size")
    remarks: list[ServeRemark] = []
    per_rank: dict[str, Any] = {}
    if ep is not None and tp % ep:
        raise UsageError(f"--ep-size {ep}: SGLang shards the experts over the {tp} tensor-parallel ranks "
                         "(moe_tp_size = tp / ep): ep must divide tp", field="ep_size")
    if not settings.get("enable_dp_attention"):
        return (), per_rank, remarks
    if dp == 1:
        remarks.append(ServeRemark("note", "dp-attention-off", "--enable-dp-attention with dp 1: SGLang turns DP "
                                   "attention off (ServerArgs._handle_data_parallelism)", "enable_dp_attention"))
        return (), per_rank, remarks
    if tp % dp:
        raise UsageError(f"--dp-size {dp}: SGLang's DP attention needs it to divide --tp-size {tp} "
                         "(ServerArgs._handle_data_parallelism asserts tp % dp == 0)", field="dp")
    seqs = settings.get("max_num_seqs")
    if seqs is not None:
        per_rank["max_num_seqs"] = max(1, int(seqs) // dp)
    remarks.append(ServeRemark("note", "dp-attention", f"--enable-dp-attention: {dp} attention DP ranks of tp "
                               f"{tp // dp} each, one KV pool per rank; the experts span all {tp} GPUs. kvplan splits "
                               f"the other weights over the {tp // dp} attention rank(s); SGLang splits the dense MLPs "
                               "and lm_head over all of them (lm_head per rank with --enable-dp-lm-head): the weights "
                               "per GPU are an estimate, high by at most those layers' share"
                               + (f"; --max-running-requests {int(seqs):,} is the whole group's: "
                                  f"{max(1, int(seqs) // dp):,} per rank" if seqs is not None else ""),
                               "enable_dp_attention"))
    return (("dp", dp), ("expert_parallel", True), ("tp", tp // dp)), per_rank, remarks


def _whole_gib(value: Any) -> int | None:
    """``--cpu-offload-gb``: SGLang's argument is an int (``ServerArgs.cpu_offload_gb``)."""
    if value is None:
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        number = -1.0
    if not (number >= 0 and number.is_integer() and number < 1 << 20):
        raise UsageError(f"--cpu-offload-gb {shown(str(value), quote=False)}: SGLang takes a whole number of GiB",
                         field="cpu_offload_gb")
    return int(number)


def _int(settings: Mapping[str, Any], key: str) -> int | None:
    value = settings.get(key)
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise UsageError(f"--{key.replace('_', '-')} {shown(str(value), quote=False)}: not an integer",
                         field=key) from None


def read_speculation(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``max_batch``'s speculative keywords from ``--speculative-algorithm`` and its flags ({} without it).

    ``--speculative-num-steps`` is kvplan's num_speculative_tokens (the draft depth; topk 1 makes the
    draft-token count steps + 1, ``_handle_eagle_family``). Unset: NEXTN leaves SGLang's per-model choice to
    ``sglang/speculative.py``; STANDALONE's choice is always 3 steps; EAGLE / EAGLE3 are planned at 3 steps,
    SGLang's choice for every target but Llama and Grok (said by ``speculation_remarks``). NGRAM verifies
    ``--speculative-num-draft-tokens`` (12 by default, ``_handle_ngram``)."""
    algorithm = settings.get("speculative_algorithm")
    if algorithm is None:
        return {}
    name = str(algorithm).strip().upper()
    if name not in _METHODS:
        raise UsageError(f"--speculative-algorithm {shown(str(algorithm), quote=False)}: kvplan plans "
                         f"{', '.join(_METHODS)}",
                         field="speculative_algorithm")
    method = _METHODS[name]
    steps = _int(settings, "speculative_num_steps")
    if method == "ngram":
        steps = _int(settings, "speculative_num_draft_tokens") or 12
    elif steps is None:
        for key in ("speculative_eagle_topk", "speculative_num_draft_tokens"):
            if settings.get(key) is not None:  # _handle_eagle_family asserts both unset without the steps
                raise UsageError(f"SGLang refuses --{key.replace('_', '-')} without --speculative-num-steps",
                                 field=key)
        if method != "mtp":
            steps = 3
    model = settings.get("speculative_draft_model_path")
    return {"speculative_method": method, "num_speculative_tokens": steps,
            "speculative_model": None if method in _DRAFTLESS else model}


def speculation_remarks(settings: Mapping[str, Any]) -> list[ServeRemark]:
    """What the plan of ``read_speculation`` leaves out, said."""
    algorithm = str(settings.get("speculative_algorithm") or "").strip().upper()
    if algorithm not in _METHODS or algorithm == "NGRAM":
        return []
    remarks = []
    steps = _int(settings, "speculative_num_steps")
    topk = _int(settings, "speculative_eagle_topk")
    draft_tokens = _int(settings, "speculative_num_draft_tokens")
    if steps is None and algorithm in ("EAGLE", "EAGLE3"):
        remarks.append(ServeRemark("warning", "speculation-not-planned",
                                   "no --speculative-num-steps: planned at SGLang's choice for most targets (3 steps, "
                                   "topk 1, 4 draft tokens); for Llama and Grok targets SGLang picks 5 steps, topk 4, "
                                   "8 draft tokens (20 slots a request), so give the flags to plan them",
                                   "speculative_algorithm"))
    if topk is not None and topk > 1 and steps is not None:
        slots = max(steps * topk, draft_tokens or 0)
        remarks.append(ServeRemark("warning", "speculation-not-planned",
                                   f"--speculative-eagle-topk {topk}: each request holds max(steps x topk, draft "
                                   f"tokens) = {slots} slots beyond its context; the plan counts topk 1 ({steps + 1}), "
                                   "which is optimistic", "speculative_eagle_topk"))
    return remarks


# --dtype (server_args.py choices auto, half, float16, bfloat16, float, float32), read by
# python/sglang/srt/configs/model_config.py _get_and_verify_dtype (a port of vLLM's older rule)
DTYPES = {"half": "float16", "float16": "float16", "float": "float32", "float32": "float32", "bfloat16": "bfloat16"}
# --quantization methods SGLang applies to an unquantized checkpoint while loading it: fp8
# (srt/layers/quantization/fp8.py Fp8LinearMethod, is_checkpoint_fp8_serialized False: every linear layer and
# the MoE experts quantized after loading, embeddings / lm_head / norms kept); bitsandbytes (its
# BitsAndBytesModelLoader is vLLM's, 4-bit nf4 with double-quantized absmax: assumed the same bytes)
ONLINE = {"fp8": "fp8", "bitsandbytes": "nf4"}
ALLOW_LONG = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
ENVIRONMENT = (ALLOW_LONG,)


def derived_context_len(spec: Any) -> tuple[int, str]:
    """SGLang's context length for the model (``get_context_length``, srt/utils/hf_transformers_utils.py): the
    config's max_position_embeddings (2048 where none) times the rope scaling factor, except where rope_scaling
    names original_max_position_embeddings or is llama3 (the factor is then 1)."""
    base = spec.max_position_embeddings or 2048
    how = f"max_position_embeddings {base:,}" if spec.max_position_embeddings else "no max_position_embeddings: 2,048"
    rope = spec.rope_scaling
    if rope is not None and rope.factor and rope.type != "llama3" and not rope.original_max_position_embeddings:
        return int(base * rope.factor), f"{how} x rope factor {rope.factor:g}"
    return int(base), how


def read_model(spec: Any, settings: Mapping[str, Any], version: str | None) -> tuple[Any, tuple[ServeRemark, ...]]:
    """The model SGLang loads under ``--dtype`` and ``--quantization``, and whether it starts with the
    ``--context-length`` given (``ModelConfig.__init__``: past the derived length it raises ValueError unless
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is true). A refusal is a remark of severity 'error'."""
    from kvplan.budgets.runtime_weights import is_unquantized

    remarks: list[ServeRemark] = []
    given = settings.get("dtype")
    text = "auto" if given is None else str(given).strip().lower()
    how = ""
    if text == "auto":
        dtype = spec.dtype
        if dtype == "float32":
            # "Following the common practice, we use float16 for float32 models"; Gemma 2 and 3 get bfloat16
            dtype = "bfloat16" if spec.model_type.startswith("gemma") else "float16"
            how = f"--dtype auto: a float32 checkpoint is loaded as {dtype} (ModelConfig._get_and_verify_dtype)"
    elif text in DTYPES:
        dtype = DTYPES[text]
        how = f"--dtype {text}: weights and activations in {dtype}"
    else:
        raise UsageError(f"{shown(str(given))}: SGLang's --dtype takes auto, half, float16, bfloat16, float or "
                         "float32", field="dtype")
    method = settings.get("quantization")
    online = None
    if method is not None:
        name = str(method).strip().lower()
        if not is_unquantized(spec):
            remarks.append(ServeRemark("note", "quantization", f"--quantization {shown(name, quote=False)}: the "
                                       f"checkpoint is already {spec.weights_dtype}; SGLang loads it as stored",
                                       "quantization"))
        elif name in ONLINE:
            online = ONLINE[name]
        else:
            remarks.append(ServeRemark("warning", "quantization", f"--quantization {shown(name, quote=False)}: "
                                       "SGLang reads this method from a checkpoint quantized with it, and this "
                                       f"checkpoint is {spec.weights_dtype or spec.dtype}: the weights are planned "
                                       "unquantized", "quantization"))
    source = {"fp8": "SGLang --quantization fp8: Fp8LinearMethod, srt/layers/quantization/fp8.py",
              "nf4": "SGLang --quantization bitsandbytes: 4-bit nf4"}.get(online or "", "SGLang --dtype")
    loaded = loaded_with_remark(spec, dtype, online, source, how, remarks)
    length = settings.get("max_model_len")
    if isinstance(length, int) and not isinstance(length, bool):
        limit, why = derived_context_len(spec)
        allowed = str(settings.get(ALLOW_LONG) or "").strip().lower() in ("true", "1")  # get_bool_env_var
        if length > limit and allowed:
            remarks.append(ServeRemark("warning", "max-model-len-beyond-model", f"--context-length {length:,} is "
                                       f"past the model's {limit:,} ({why}); {ALLOW_LONG}=1 lets SGLang start "
                                       "anyway: planned as given", "max_model_len"))
        elif length > limit:
            remarks.append(ServeRemark("error", "max-model-len-beyond-model", f"SGLang refuses to start: "
                                       f"--context-length {length:,} is greater than the model's {limit:,} ({why}; "
                                       "ModelConfig raises ValueError). Fix: --context-length "
                                       f"{limit:,} or less, or set {ALLOW_LONG}=1 if the model really serves "
                                       "that length", "max_model_len"))
    return loaded, tuple(remarks)


def short_pool(pool_tokens: int, context_len: int, settings: Mapping[str, Any]) -> ServeRemark | None:
    """What SGLang does when its pool holds fewer tokens than one request of ``--context-length``: it starts
    (model_runner raises "Not enough memory. Please try to increase --mem-fraction-static." only for an empty
    pool) and caps every request: ``max_req_len = min(context_len - 1, max_total_num_tokens - 1)``,
    ``max_req_input_len = max_req_len - 5``, asserting both positive ("Memory pool size is too small";
    srt/managers/tp_worker.py TpModelWorker.__init__). A longer input is refused ("Input length ... exceeds the
    maximum allowed length") or, with --allow-auto-truncate, cut (srt/managers/utils.py validate_input_length);
    the scheduler clamps max_new_tokens to what the request leaves of max_req_len."""
    max_req_len = min(context_len - 1, pool_tokens - 1)
    if pool_tokens <= 0:
        return ServeRemark("error", "does-not-fit", "SGLang refuses to start: no KV pool is left (\"Not enough "
                           "memory. Please try to increase --mem-fraction-static.\", model_runner.py)",
                           "max_model_len")
    if max_req_len - 5 <= 0:
        return ServeRemark("error", "does-not-fit", f"SGLang refuses to start: a pool of {pool_tokens:,} tokens "
                           "leaves no room for one request (\"Memory pool size is too small\", tp_worker.py)",
                           "max_model_len")
    cut = ("cut to that length (--allow-auto-truncate)" if settings.get("allow_auto_truncate")
           else "refused (\"Input length ... exceeds the maximum allowed length\"; --allow-auto-truncate cuts it)")
    return ServeRemark("warning", "context-capped", f"SGLang still starts, but its pool holds {pool_tokens:,} "
                       f"tokens, less than one request of --context-length {context_len:,}: it caps every request "
                       f"at {max_req_len:,} tokens (max_req_len = min(context_len - 1, max_total_num_tokens - 1), "
                       f"tp_worker.py); an input of {max_req_len - 5:,} tokens or more is {cut}, and the output is "
                       "clamped to what is left", "max_model_len")


SERVE = ServeFlags(
    engine="sglang",
    modules=("sglang.launch_server",),
    host_modules=(("dynamo", "dynamo.sglang"),),  # Dynamo's worker adds SGLang's ServerArgs
    flags=(
        ("--model-path", "model"), ("--model", "model"), ("--tp-size", "tp"), ("--tp", "tp"),
        ("--tensor-parallel-size", "tp"), ("--pp-size", "pp"), ("--pipeline-parallel-size", "pp"),
        ("--dp-size", "dp"), ("--dp", "dp"), ("--data-parallel-size", "dp"),
        ("--enable-dp-attention", "enable_dp_attention"), ("--ep-size", "ep_size"), ("--ep", "ep_size"),
        ("--expert-parallel-size", "ep_size"), ("--context-length", "max_model_len"),
        ("--max-running-requests", "max_num_seqs"), ("--mem-fraction-static", "mem_fraction_static"),
        ("--kv-cache-dtype", "kv_cache_dtype"), ("--chunked-prefill-size", "max_num_batched_tokens"),
        ("--page-size", "block_size"), ("--disable-cuda-graph", "enforce_eager"), ("--config", "config"),
        ("--enable-hierarchical-cache", "enable_hierarchical_cache"), ("--hicache-ratio", "hicache_ratio"),
        ("--hicache-size", "hicache_size"), ("--disable-radix-cache", "disable_radix_cache"),
        ("--speculative-algorithm", "speculative_algorithm"),
        ("--speculative-num-draft-tokens", "speculative_num_draft_tokens"),
        ("--speculative-draft-model-path", "speculative_draft_model_path"), ("--cpu-offload-gb", "cpu_offload_gb"),
        ("--speculative-num-steps", "speculative_num_steps"), ("--speculative-eagle-topk", "speculative_eagle_topk"),
        ("--quantization", "quantization"), ("--dtype", "dtype"), ("--allow-auto-truncate", "allow_auto_truncate"),
    ),
    booleans=("enforce_eager", "enable_hierarchical_cache", "disable_radix_cache", "allow_auto_truncate",
              "enable_dp_attention"),
    environment=ENVIRONMENT,
    model_reader=read_model,
    short_pool=short_pool,
    floats=("hicache_ratio",),
    fp8_kv_flag="--kv-cache-dtype fp8_e4m3",
    speculation=read_speculation,
    reader=read_serve,
)
