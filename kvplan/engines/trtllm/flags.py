"""``trtllm-serve MODEL ...`` and its ``--extra_llm_api_options`` YAML, read as TensorRT-LLM reads them.

Sources (NVIDIA/TensorRT-LLM):
- ``tensorrt_llm/commands/serve.py``: ``main`` is a click ``DefaultGroup``: ``trtllm-serve MODEL`` and
  ``trtllm-serve serve MODEL`` both run ``serve`` (``python -m tensorrt_llm.commands.serve`` too). Its click
  options are spelled with underscores only (click does not turn ``--tp-size`` into ``--tp_size``):
  ``--tensor_parallel_size``/``--tp_size``, ``--pipeline_parallel_size``/``--pp_size``, ``--max_batch_size``
  (the scheduler's request cap), ``--max_num_tokens``, ``--max_seq_len``, ``--free_gpu_memory_fraction``/
  ``--kv_cache_free_gpu_memory_fraction`` (default 0.9), ``--kv_cache_dtype`` (auto, fp8, nvfp4; 2026),
  ``--backend`` (pytorch by default from 1.0, a TensorRT engine before; tensorrt/trt, _autodeploy: variant.py), ``--config``/``--extra_llm_api_options``,
  ``--max_beam_width`` (default 1), ``--ep_size`` (MoE expert parallelism), ``--cp_size`` (context parallelism).
- ``tensorrt_llm/llmapi/llm_args.py`` ``update_llm_args_with_extra_dict``: the YAML's top-level keys are
  ``TorchLlmArgs`` fields. Before 1.2 the YAML wins on every key it sets and its ``kv_cache_config`` replaces
  the one the flags built (``llm_args | llm_args_dict``), so ``--kv_cache_free_gpu_memory_fraction`` is lost
  when the YAML has a ``kv_cache_config`` without ``free_gpu_memory_fraction`` (``KvCacheConfig``'s 0.9
  applies). From 1.2 (PR #14812, "explicit CLI > YAML > defaults") a flag typed on the command line wins, the
  YAML fills the rest, and ``kv_cache_config`` is merged key by key.
- ``KvCacheConfig``: ``free_gpu_memory_fraction`` 0.9, ``max_tokens`` None (a cap: the smaller of it and the
  fraction's tokens), ``enable_block_reuse`` True, ``dtype`` "auto", ``host_cache_size`` None (bytes),
  ``tokens_per_block`` 32.
- ``speculative_config`` (``DecodingBaseConfig.from_dict`` by ``decoding_type``): ``MTP``
  (``num_nextn_predict_layers``, the draft length), ``Eagle3`` (``max_draft_len``, ``speculative_model_dir``
  or ``speculative_model``, ``eagle3_one_model`` True by default), ``Eagle``, ``Draft_Target`` /
  ``DraftTarget``, ``NGram`` (``max_draft_len``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from collections.abc import Mapping

from kvplan.engines.serve_format import ServeFlags, ServeMerge, ServeReading, ServeRemark, shown
from kvplan.errors import UsageError

CONFIG = "extra_llm_api_options"
CLI_WINS_SINCE = (1, 2)  # PR #14812: explicit CLI flags take precedence over the YAML (release notes of 1.2)
DEFAULT_FRACTION = 0.9  # KvCacheConfig.free_gpu_memory_fraction
MAX_DRAFT = 1 << 10  # draft tokens a step: TensorRT-LLM's proposers use a handful; each is a KV slot of every request

# TorchLlmArgs field -> kvplan setting, for the settings the budget and the check read
_TOP = {"tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "max_batch_size": "max_num_seqs",
        "max_num_tokens": "max_num_batched_tokens", "max_seq_len": "max_model_len", "backend": "backend",
        "max_beam_width": "max_beam_width", "moe_expert_parallel_size": "ep_size", "context_parallel_size": "cp_size"}
_KV = {"free_gpu_memory_fraction": "free_gpu_memory_fraction", "dtype": "kv_cache_dtype",
       "tokens_per_block": "block_size"}
_BACKENDS = ("pytorch", "tensorrt", "trt", "_autodeploy")
_INTS = {"tp", "pp", "max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size", "max_beam_width",
         "ep_size", "cp_size"}
# decoding_type -> kvplan's method
_METHODS = {"mtp": "mtp", "eagle3": "eagle3", "eagle": "eagle", "draft_target": "draft_model",
            "drafttarget": "draft_model", "ngram": "ngram"}


def _config(settings: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The YAML's path as messages show it and its mapping (None where kvplan could not read the file)."""
    entry = settings.get(CONFIG)
    if not isinstance(entry, Mapping):
        return shown(str(entry or ""), quote=False), None
    path = shown(str(entry.get("path")), quote=False)
    if entry.get("error"):
        raise UsageError(f"--extra_llm_api_options {path}: {entry['error']}", field=CONFIG)
    data = entry.get("data")
    if data is None:
        return path, None
    if not isinstance(data, Mapping):  # update_llm_args_with_extra_options: "Configuration file root must be a mapping"
        raise UsageError(f"--extra_llm_api_options {path}: TensorRT-LLM needs a mapping at the top of the file",
                         field=CONFIG)
    return path, dict(data)


def _section(data: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"{path}: {key} is not a mapping", field=CONFIG)
    return dict(value)


MAX_COUNT = 1 << 40  # tokens, sequences, ranks: past any deployment (a 4,000-digit count is a typo, not a plan)
MAX_HOST_BYTES = 1 << 50  # 1 PiB of host cache


def _positive(value: Any, where: str, field: str = CONFIG, limit: int = MAX_COUNT) -> int:
    """A YAML integer from 1 to ``limit``: a boolean (``true`` is 1 to Python), a fraction or a string is refused."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise UsageError(f"{where}: {shown(value)} is not a whole number from 1 to {limit:,}", field=field)
    return value


def _value(kvplan_key: str, value: Any, where: str) -> Any:
    """A YAML value as pydantic would accept it (ints stay ints; a fraction in [0, 1])."""
    if kvplan_key in _INTS:
        return _positive(value, where)
    if kvplan_key == "free_gpu_memory_fraction":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise UsageError(f"{where}: {shown(value)} is not a fraction in [0, 1]", field=CONFIG)
        return float(value)
    if not isinstance(value, str):  # backend, kv_cache_config.dtype: names
        raise UsageError(f"{where}: {shown(value)} is not a name", field=CONFIG)
    return value


def merge_config(settings: Mapping[str, Any], version: str | None) -> ServeMerge:
    """The settings the server runs with once the YAML is merged with the flags (see the module's sources)."""
    from kvplan.engines.version import parse_version

    path, data = _config(settings)
    if CONFIG not in settings:
        return ServeMerge()
    if data is None:
        return ServeMerge(remarks=(ServeRemark("note", "not-read", f"--extra_llm_api_options {path}: not a file kvplan "
                                               "checks (relative to the deployment file, a compose bind mount or a "
                                               "ConfigMap in the same manifest); the flags and TensorRT-LLM's defaults "
                                               "are checked instead", CONFIG),))
    cli_wins = parse_version(version or "latest") >= CLI_WINS_SINCE
    rule = ("TensorRT-LLM 1.2+ lets a typed flag win (explicit CLI > YAML)" if cli_wins else
            "TensorRT-LLM before 1.2 lets the YAML win")
    if version is None or version == "latest":
        rule += " (no version from the image tag: the newest rule is assumed; before 1.2 the YAML wins)"
    kv = _section(data, "kv_cache_config", path)
    # a null is pydantic's None: the field's default (max_seq_len None: deduced from the model), as if unset
    found = [(key, data[field], f"{path}: {field}") for field, key in _TOP.items() if data.get(field) is not None]
    found += [(key, kv[field], f"{path}: kv_cache_config.{field}") for field, key in _KV.items()
              if kv.get(field) is not None]
    out: list[tuple[str, Any, str]] = []
    remarks: list[ServeRemark] = []
    for key, raw, where in found:
        value = _value(key, raw, where)
        flag = settings.get(key)
        if flag is not None and flag != value:
            remarks.append(ServeRemark("note", "config-file", f"{where} {shown(value, quote=False)} and the flag's "
                                       f"{shown(flag, quote=False)}: {rule}, so "
                                       f"{shown(flag if cli_wins else value, quote=False)} is checked", key))
            if cli_wins:
                continue
        out.append((key, value, where))
    if not cli_wins and "kv_cache_config" in data and "free_gpu_memory_fraction" not in kv:
        flag = settings.get("free_gpu_memory_fraction")
        if flag is not None and flag != DEFAULT_FRACTION:
            out.append(("free_gpu_memory_fraction", DEFAULT_FRACTION, f"{path}: kv_cache_config (default)"))
            remarks.append(ServeRemark("warning", "config-file", f"{path} sets kv_cache_config without "
                                       f"free_gpu_memory_fraction: before 1.2 it replaces the whole KvCacheConfig the "
                                       f"flags built, so --kv_cache_free_gpu_memory_fraction {flag:g} is lost and "
                                       f"KvCacheConfig's {DEFAULT_FRACTION} is checked", "free_gpu_memory_fraction"))
    return ServeMerge(settings=tuple(out), remarks=tuple(remarks))


def read_speculation(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``max_batch``'s speculative keywords from the YAML's ``speculative_config`` ({} without one)."""
    path, data = _config(settings)
    spec = _section(data or {}, "speculative_config", path)
    if not spec:
        return {}
    kind = str(spec.get("decoding_type", "")).strip().lower()
    if kind not in _METHODS:
        raise UsageError(f"{path}: speculative_config.decoding_type {shown(spec.get('decoding_type'))}: kvplan plans "
                         "MTP, "
                         "Eagle3, Draft_Target and NGram", field="speculative_method")
    method = _METHODS[kind]
    if method == "eagle":  # EagleDecodingConfig runs in the TensorRT engine backend only (trtllm/speculative.py)
        raise UsageError(f"{path}: speculative_config.decoding_type Eagle: TensorRT-LLM's PyTorch backend runs EAGLE-3 "
                         "heads (decoding_type Eagle3), not EAGLE-1/2", field="speculative_method")
    draft_len = spec.get("max_draft_len")
    if method == "mtp":  # MTPDecodingConfig: max_draft_len = num_nextn_predict_layers (1 by default)
        draft_len = spec.get("num_nextn_predict_layers", draft_len if draft_len is not None else 1)
    if draft_len is not None:  # a draft of 0 tokens or fewer is no speculation: invalid input, not a failed plan
        key = "num_nextn_predict_layers" if method == "mtp" and "num_nextn_predict_layers" in spec else "max_draft_len"
        draft_len = _positive(draft_len, f"{path}: speculative_config.{key}", "num_speculative_tokens", MAX_DRAFT)
    model = spec.get("speculative_model", spec.get("speculative_model_dir"))
    return {"speculative_method": method, "num_speculative_tokens": draft_len,
            "speculative_model": None if method in ("mtp", "ngram") else model}


def read_serve(settings: Mapping[str, Any], version: str | None) -> ServeReading:
    """Block reuse, the host cache tier, the token cap and what the plan leaves out, from the merged settings."""
    path, data = _config(settings)
    kv = _section(data or {}, "kv_cache_config", path)
    spec = _section(data or {}, "speculative_config", path)
    options: dict[str, Any] = {}
    remarks: list[ServeRemark] = []
    for key in ("quant_config", "dtype"):
        if data and data.get(key) not in (None, "auto"):
            # the PyTorch backend serves the quantization a ModelOpt checkpoint carries (hf_quant_config.json,
            # docs/source/features/quantization.md "Running Pre-quantized Models"); kvplan does not model either key
            remarks.append(ServeRemark("note", "not-read", f"{path}: {key} is not read: the weights are planned as the "
                                       "checkpoint stores them (its own dtype and quantization)", CONFIG))
    reuse = kv.get("enable_block_reuse", True)
    sharing = reuse is not False
    if not sharing:
        remarks.append(ServeRemark("note", "prefix-caching", f"{path}: kv_cache_config.enable_block_reuse false: "
                                   "requests share no KV blocks, a shared prefix is stored once per request", CONFIG))
    host = kv.get("host_cache_size")
    if host is not None:
        if isinstance(host, bool) or not isinstance(host, int) or not 0 <= host <= MAX_HOST_BYTES:
            raise UsageError(f"{path}: kv_cache_config.host_cache_size {shown(host)} is not a byte count from 0 to "
                             f"{MAX_HOST_BYTES:,}", field=CONFIG)
        if host:
            options["host_cache_bytes"] = host
    cap = kv.get("max_tokens")
    if cap is not None:
        cap = _positive(cap, f"{path}: kv_cache_config.max_tokens")
    backend, budget = _backend(settings, version, remarks)
    if spec and str(spec.get("decoding_type", "")).lower() == "eagle3" and spec.get("eagle3_one_model") is False:
        remarks.append(ServeRemark("warning", "speculation-not-planned", f"{path}: eagle3_one_model false: two-model "
                                   "EAGLE-3 gives the head a KV cache of its own; kvplan plans the one-model layout "
                                   "(the head's layers in the target's cache)", CONFIG))
    beams = _parallel_remarks(settings, data or {}, path, backend, remarks)
    return ServeReading(engine_options=tuple(sorted(options.items())), settings=budget, sharing=sharing,
                        remarks=tuple(remarks),
                        parallel=attention_dp(settings, data or {}),
                        max_kv_tokens=cap, beam_width=beams)


def _backend(settings: Mapping[str, Any], version: str | None,
             remarks: list[ServeRemark]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The backend the server runs (``--backend``, the YAML's ``backend:``; unset: the release's default, variant.py)
    and the budget setting that plans it where it is not the release's default."""
    from kvplan.engines.trtllm import variant
    from kvplan.engines.version import parse_version

    ver = parse_version(version or "latest")
    default = "pytorch" if ver >= variant.PYTORCH_DEFAULT_SINCE else "tensorrt"
    backend = str(settings.get("backend") or default).lower()
    if backend not in _BACKENDS:  # serve.py: click ChoiceWithAlias(["pytorch", "tensorrt", "_autodeploy"], {"trt": ...})
        raise UsageError(f"--backend {shown(backend, quote=False)}: trtllm-serve takes pytorch, tensorrt (trt) or "
                         "_autodeploy",
                         field="backend")
    if backend == "_autodeploy":
        remarks.append(ServeRemark("warning", "engine-not-planned", f"--backend {backend}: kvplan's TensorRT-LLM budget "
                                   "and speculation rules are the PyTorch backend's (the default); this backend's "
                                   "warm-up and buffers differ", "backend"))
        # AutoDeploy is a PyTorch flow (tensorrt_llm._torch.auto_deploy, release notes 0.19): planned by that rule
        pytorch = variant.PYTORCH_SINCE <= ver < variant.PYTORCH_DEFAULT_SINCE
        return backend, ((variant.FIELD, "pytorch"),) if pytorch else ()
    chosen = "pytorch" if backend == "pytorch" else "engine"
    try:
        variant.chosen(ver, chosen)
    except UsageError as exc:  # the PyTorch backend before 0.17: named by the deployment's own flag
        raise UsageError(f"--backend {backend}: {exc.message}", field="backend") from None
    if chosen == "engine" and ver >= variant.PYTORCH_DEFAULT_SINCE:
        remarks.append(ServeRemark("note", "backend", f"--backend {backend}: planned as a prebuilt TensorRT engine (the "
                                   "C++ runtime: runtime buffers and decoder sized by max_batch_size and the "
                                   "vocabulary); kvplan's speculation rules are the PyTorch backend's", "backend"))
    same = (chosen == "pytorch") == (ver >= variant.PYTORCH_DEFAULT_SINCE)
    return backend, () if same else ((variant.FIELD, chosen),)


def _count(settings: Mapping[str, Any], key: str) -> int:
    raw = settings.get(key)
    if raw is None:
        return 1
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value < 1 or value > 1 << 20:
        raise UsageError(f"{shown(raw)} is not a positive integer", field=key)
    return value


def attention_dp(settings: Mapping[str, Any], data: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``enable_attention_dp`` (extra options YAML): tp_size ranks of attention tp 1, one KV pool and one
    scheduler each, the MoE layers over all of them: max_batch's tp 1, dp = tp_size, experts shared."""
    tp = _count(settings, "tp")
    if data.get("enable_attention_dp") is True and tp > 1:
        return (("dp", tp), ("expert_parallel", True), ("tp", 1))
    return ()


def _parallel_remarks(settings: Mapping[str, Any], data: Mapping[str, Any], path: str, backend: str,
                      remarks: list[ServeRemark]) -> int:
    """Beam width, attention DP, expert and context parallelism: what each does to the KV plan. Returns the beams
    every request runs with."""
    tp, beams = _count(settings, "tp"), _count(settings, "max_beam_width")
    ep, cp = _count(settings, "ep_size"), _count(settings, "cp_size")
    if beams > 1 and backend == "pytorch":
        # tensorrt_llm/_torch/pyexecutor/py_executor.py PyExecutor._validate_request: a request whose beam width is
        # not max_beam_width is refused ("... is not supported!"), so every request runs max_beam_width beams
        remarks.append(ServeRemark("note", "beam-search", f"max_beam_width {beams}: TensorRT-LLM's PyTorch backend "
                                   f"takes only requests of {beams} beams (PyExecutor._validate_request), so "
                                   f"min-concurrency is planned as requests of {beams} beams: the prompt's blocks "
                                   "shared but the last, every generation block one per beam", "max_beam_width"))
    elif beams > 1:
        remarks.append(ServeRemark("note", "not-read", f"max_beam_width {beams}: requests may ask for up to {beams} "
                                   "beams with this backend; kvplan plans one beam a request", "max_beam_width"))
    if ep > 1 and tp % ep:
        # tensorrt_llm/mapping.py Mapping: moe_tp_size x moe_ep_size (x moe_cluster_size) must equal tp_size
        raise UsageError(f"ep_size {ep}: TensorRT-LLM needs moe_tp_size x moe_ep_size = tp_size ({tp}): ep must "
                         "divide tp", field="ep_size")
    if data.get("enable_attention_dp") is True and tp > 1:
        # llm_args.py enable_attention_dp: attention (and the dense MLPs) run data-parallel across the tp ranks, each
        # rank with every KV head, its own KV cache and its own requests (py_executor.py caps the whole at tp_size x
        # max_batch_size); the MoE layers span all tp ranks (mapping.py: moe_tp_size x moe_ep_size = tp_size)
        remarks.append(ServeRemark("note", "attention-dp", f"{path}: enable_attention_dp: planned as {tp} attention "
                                   f"DP ranks of one GPU each, every KV head and its own KV cache on each, up to "
                                   f"max_batch_size requests each; the routed experts spread over all {tp} GPUs",
                                   CONFIG))
    elif ep > 1:
        remarks.append(ServeRemark("note", "expert-parallel", f"ep_size {ep}: MoE experts spread over {ep} groups of "
                                   f"the tp ranks (moe_tp_size = tp / ep, mapping.py): every GPU holds 1 / tp {tp} "
                                   "of them either way, as planned; the KV layout is the same", "ep_size"))
    if cp > 1:
        # tensorrt_llm/mapping.py Mapping: world_size = tp_size x pp_size x cp_size; each sequence's KV is split over
        # the cp ranks (Helix), which kvplan's layouts do not model
        remarks.append(ServeRemark("warning", "not-read", f"cp_size {cp}: context parallelism spreads each "
                                   f"sequence's KV over {cp} ranks and multiplies the GPUs (tp x pp x cp); kvplan "
                                   "plans without it, so the KV per GPU and the GPU count here are not the engine's",
                                   "cp_size"))
    return beams if backend == "pytorch" else 1


# TorchLlmArgs fields an extra_llm_api_options file commonly sets (tensorrt_llm/llmapi/llm_args.py): a YAML file with
# only these at the top is such a file, not a deployment
CONFIG_KEYS = frozenset({
    "tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size", "moe_expert_parallel_size",
    "moe_tensor_parallel_size", "moe_cluster_parallel_size", "enable_attention_dp", "attention_dp_config",
    "max_batch_size", "max_num_tokens", "max_seq_len", "max_beam_width", "max_input_len", "kv_cache_config",
    "speculative_config", "cuda_graph_config", "print_iter_log", "enable_chunked_prefill", "scheduler_config",
    "backend", "trust_remote_code", "dtype", "moe_config", "disable_overlap_scheduler", "stream_interval",
    "num_postprocess_workers", "enable_iter_perf_stats", "cache_transceiver_config", "torch_compile_config",
    "enable_autotuner", "batch_wait_timeout_ms", "guided_decoding_backend", "kv_connector_config", "sampler_type",
    "lora_config", "enable_lora", "load_format", "checkpoint_format", "env_overrides", "telemetry_config",
    "gpus_per_node", "quant_config", "enable_min_latency", "allreduce_strategy", "build_config", "decoding_config",
    "peft_cache_config", "revision", "tokenizer", "return_perf_metrics", "otlp_traces_endpoint",
})

SERVE = ServeFlags(
    engine="trtllm",
    commands=("trtllm-serve",),
    modules=("tensorrt_llm.commands.serve",),
    default_serve=True,
    unread_host_modules=(("dynamo", "dynamo.trtllm"),),  # Dynamo's own flags, not trtllm-serve's
    wrappers=("trtllm-llmapi-launch",),  # tensorrt_llm/llmapi/trtllm-llmapi-launch: runs its arguments under MPI
    # NGC's release image (docker/Makefile, docs "Pre-built release container images"): tag = TensorRT-LLM version;
    # it runs no server by default, so a command is needed. Triton's *-trtllm-python-py3 images are tagged with
    # Triton's release (25.01), not TensorRT-LLM's: no version read from them.
    tagged_images=(r"(^|/)tensorrt-llm/release(:|@|$)", r"(^|/)tensorrt_llm(:|@|$)"),
    flags=(
        ("--tp_size", "tp"), ("--tensor_parallel_size", "tp"), ("--pp_size", "pp"),
        ("--pipeline_parallel_size", "pp"), ("--max_batch_size", "max_num_seqs"),
        ("--max_num_tokens", "max_num_batched_tokens"), ("--max_seq_len", "max_model_len"),
        ("--kv_cache_free_gpu_memory_fraction", "free_gpu_memory_fraction"),
        ("--free_gpu_memory_fraction", "free_gpu_memory_fraction"), ("--kv_cache_dtype", "kv_cache_dtype"),
        ("--backend", "backend"), ("--extra_llm_api_options", CONFIG), ("--config", CONFIG),
        ("--trust_remote_code", "trust_remote_code"), ("--enable_chunked_prefill", "enable_chunked_prefill"),
        ("--fail_fast_on_attention_window_too_large", "fail_fast_on_attention_window_too_large"),
        ("--max_beam_width", "max_beam_width"), ("--ep_size", "ep_size"), ("--cp_size", "cp_size"),
    ),
    booleans=("trust_remote_code", "enable_chunked_prefill", "fail_fast_on_attention_window_too_large"),
    floats=("free_gpu_memory_fraction",),
    config_files=(CONFIG,),
    config_keys=CONFIG_KEYS,
    merge=merge_config,
    reader=read_serve,
    speculation=read_speculation,
    fp8_kv_flag="kv_cache_config: {dtype: fp8}",
)
