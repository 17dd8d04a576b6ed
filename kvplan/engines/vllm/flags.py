"""``vllm serve`` flags as vLLM's argparse reads them (``vllm/engine/arg_utils.py``)."""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.engines.serve_format import ServeFlags, ServeReading, ServeRemark, json_object, loaded_with_remark, shown
from kvplan.engines.speculative import MAX_SPECULATIVE_TOKENS
from kvplan.errors import UsageError


def vllm_int(text: str) -> int:
    """vLLM's human-readable integers (``human_readable_int``): '32768', '32k' (10^3), '32K' (2^10), '1M'."""
    import re  # here, where a value is read: importing re costs ~6 ms of a start

    stripped = text.strip()  # a plain '32768' ends in no suffix: no pattern compiled for it
    m = re.match(r"^(\d+(?:\.\d+)?)([kKmMgGtT])$", stripped) if stripped and stripped[-1] in "kKmMgGtT" else None
    if m:
        number, suffix = m.groups()
        if suffix.islower():
            scaled = float(number) * {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}[suffix]
            if scaled == float("inf"):  # 400 digits and a 'k': int(inf) raises OverflowError
                raise ValueError(text)
            return int(scaled)
        if "." in number:
            raise ValueError(text)
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(text.strip())


_DRAFTLESS = frozenset({"ngram", "mtp"})
MAX_DRAFT_TOKENS = MAX_SPECULATIVE_TOKENS  # vLLM sets no bound: the one every plan takes (engines/speculative.py)


def draft_tokens(value: Any, where: str) -> int | None:
    """``num_speculative_tokens`` as kvplan plans it: a whole number from 1 (``SpeculativeConfig`` in
    ``vllm/config/speculative.py`` types it ``int``; a draft of 0 tokens or fewer is no speculation). A boolean
    (which Python counts as 1), a fraction, a non-finite or absurd number, a count below 1: refused by name,
    invalid input (exit 2) rather than a deployment that fails. ``"3"`` is taken, as pydantic's lax mode takes it."""
    if value is None:
        return None
    count: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        count = value
    elif isinstance(value, float) and value.is_integer():
        count = int(value) if abs(value) <= MAX_DRAFT_TOKENS else MAX_DRAFT_TOKENS + 1
    elif isinstance(value, str) and value.strip().lstrip("+-").isascii() and value.strip().lstrip("+-").isdigit() \
            and len(value.strip()) <= 20:
        count = int(value.strip())  # pydantic's lax mode takes "3"
    if count is None or not 1 <= count <= MAX_DRAFT_TOKENS:
        raise UsageError(f"{where}: num_speculative_tokens {shown(value)} must be a whole number from 1 to "
                         f"{MAX_DRAFT_TOKENS:,}", field="num_speculative_tokens")
    return count


def read_speculation(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``max_batch``'s speculative keywords from ``--speculative-config`` JSON (or the older
    ``--speculative-model`` / ``--num-speculative-tokens`` flags).

    ``SpeculativeConfig`` (``vllm/config/speculative.py``): without a ``method``, a ``model`` of
    ``ngram`` means n-gram, a model whose name says EAGLE-3 / EAGLE is an EAGLE head, any other model
    a draft model; ``*_mtp`` methods (deepseek_mtp, ...) are MTP."""
    raw = settings.get("speculative_config")
    config: Any = {}
    if raw is not None:
        config = json_object(raw, "--speculative-config", "speculative_config")
    model = config.get("model", settings.get("speculative_model"))
    tokens = config.get("num_speculative_tokens", settings.get("num_speculative_tokens"))
    method = config.get("method")
    if method is None and model is None and tokens is None:
        return {}
    if model is not None and not isinstance(model, str):
        raise UsageError(f"--speculative-config: model {shown(model)} is not a model name", field="speculative_config")
    if method is not None and (not isinstance(method, str) or len(method) > 64):  # names: eagle3, deepseek_mtp
        raise UsageError(f"--speculative-config: method {shown(method)} is not a method name",
                         field="speculative_config")
    if method is None:
        name = str(model or "").lower()
        method = ("ngram" if name in ("ngram", "[ngram]") else "eagle3" if "eagle3" in name
                  else "eagle" if "eagle" in name else "draft_model")
    method = str(method).lower()
    if method.endswith("_mtp"):
        method = "mtp"
    count = draft_tokens(tokens, "--speculative-config" if "num_speculative_tokens" in config
                         else "--num-speculative-tokens")
    draft_tp = config.get("draft_tensor_parallel_size")
    if draft_tp is not None:
        # SpeculativeConfig._verify_and_get_draft_tp (vllm/config/speculative.py): 1 or the target's tp, else
        # vLLM refuses to start. kvplan shards the draft at the target's tp: EAGLE / MTP proposers build from
        # the target's parallel config (llm_base_proposer._create_draft_vllm_config, 0.33) and a draft model
        # must match it (DraftModelProposer._raise_if_draft_tp_mismatch, 0.33)
        tp = int(settings.get("tp") or 1)
        if str(draft_tp) not in ("1", str(tp)):
            raise UsageError(f"draft_tensor_parallel_size {shown(draft_tp)}: vLLM accepts 1 or the target's "
                             f"tensor_parallel_size ({tp})", field="speculative_config")
        if method == "draft_model" and str(draft_tp) != str(tp):
            raise UsageError(f"draft_tensor_parallel_size {shown(draft_tp)}: vLLM's draft-model proposer needs the "
                             f"target's tensor_parallel_size ({tp}) (DraftModelProposer, 0.33)",
                             field="speculative_config")
    return {"speculative_method": method, "num_speculative_tokens": count,
            "speculative_model": None if method in _DRAFTLESS else model}


GIB = 1 << 30


ENVIRONMENT = ("VLLM_USE_V1", "VLLM_USE_SIMPLE_KV_OFFLOAD", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_USE_V2_MODEL_RUNNER",
               "VLLM_USE_FLASHINFER_SAMPLER")
"""Environment variables a deployment sets that change vLLM's host tiers or budget (read by ``kvplan/deploy``)."""
V0_DEFAULT_SWAP_GIB = 4  # CacheConfig.swap_space = 4 (vllm 0.8.5 vllm/config.py, 0.10.1.1 vllm/config/cache.py)
V1_DEFAULT_SINCE = (0, 8)  # envs.py: VLLM_USE_V1 defaults to "1" from 0.8.0; before, V1 was opt-in
SIMPLE_OFFLOAD_SINCE = (0, 19)  # envs.VLLM_USE_SIMPLE_KV_OFFLOAD: in the 0.19.0 wheel, not in 0.18.0


def _env_flag(value: object) -> bool | None:
    """vLLM reads these as ``bool(int(os.getenv(NAME, default)))``; None where the variable is not set."""
    if value is None:
        return None
    try:
        return bool(int(str(value).strip() or "0"))
    except ValueError:
        raise UsageError(f"{shown(value)}: vLLM reads this environment variable as an integer (0 or 1)",
                         field="environment") from None


def is_v0(version: str | None, settings: Mapping[str, Any]) -> bool:
    """Whether the deployment runs vLLM's V0 engine: before 0.8 unless ``VLLM_USE_V1=1``, 0.8-0.10 only with
    ``VLLM_USE_V1=0`` (0.8 still falls back to V0 by itself for features V1 lacked: not modelled), never from
    0.11 (V0 removed)."""
    from kvplan.engines.version import parse_version
    from kvplan.engines.vllm.variant import V0_REMOVED_IN  # planned with anyway; offload.py only for a host tier

    ver = parse_version(version or "latest")
    use_v1 = _env_flag(settings.get("VLLM_USE_V1"))
    if ver >= V0_REMOVED_IN:
        return False
    if ver < V1_DEFAULT_SINCE:
        return use_v1 is not True
    return use_v1 is False


def read_serve(settings: Mapping[str, Any], version: str | None) -> ServeReading:
    """Offload tiers, weight offload and prefix caching from the settings ``vllm serve`` flags gave.

    - ``--kv-offloading-size`` GiB (a float, for the whole deployment) with ``--kv-offloading-backend``
      ``native`` (the default from 0.14) or ``lmcache`` (``vllm/config/cache.py`` ``CacheConfig``;
      ``vllm/config/vllm.py`` ``_post_init_kv_transfer_config`` turns native into ``OffloadingConnector``,
      or ``SimpleCPUOffloadConnector`` with ``VLLM_USE_SIMPLE_KV_OFFLOAD=1``; lmcache into LMCache's
      connector). 0.11.1-0.13 offload only with a backend given (``engines/vllm/offload.py``).
    - ``--swap-space`` GiB per GPU: V0's CPU swap, 4 GiB by default, pinned; V1 never swaps.
    - ``--cpu-offload-gb`` GiB of weights per GPU in host memory: ``set_cpu_offload_max_bytes(int(gb x
      1024**3))`` (``vllm/v1/worker/gpu_model_runner.py``), then ``maybe_offload_to_cpu``
      (``vllm/model_executor/models/utils.py``) moves decoder-layer parameters until that is reached.
    - ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``: V1 caches prefixes by default, V0 does not
      (``EngineArgs._set_default_args_v1`` sets True; V0 keeps ``CacheConfig``'s False).
    """
    from kvplan.engines.version import parse_version

    options: dict[str, Any] = {}
    budget: dict[str, Any] = {}
    remarks: list[ServeRemark] = []
    ver = parse_version(version or "latest")
    v0 = is_v0(version, settings)
    simple = _env_flag(settings.get("VLLM_USE_SIMPLE_KV_OFFLOAD"))
    prefix_off = bool(settings.get("no_enable_prefix_caching")) or settings.get("enable_prefix_caching") is False
    size = settings.get("kv_offloading_size")
    given_backend = settings.get("kv_offloading_backend")
    backend = str(given_backend or "native").lower()
    if size is not None:
        # here, not above: a deployment without a host tier imports no offload rules (offload.py, pinned.py)
        from kvplan.engines.vllm.offload import FLAGS_SINCE, NATIVE_SINCE

        if FLAGS_SINCE <= ver < NATIVE_SINCE and given_backend is None:
            remarks.append(ServeRemark("note", "not-read", f"--kv-offloading-size {size:g} without "
                                       "--kv-offloading-backend: vLLM before 0.14 offloads nothing then",
                                       "kv_offloading_size"))
        elif backend == "native" and simple and ver >= SIMPLE_OFFLOAD_SINCE and prefix_off:
            remarks.append(ServeRemark("warning", "offload-off", "VLLM_USE_SIMPLE_KV_OFFLOAD=1 without prefix "
                                       "caching: SimpleCPUOffloadConnector turns CPU offloading off (it needs "
                                       "prefix caching); no host tier", "VLLM_USE_SIMPLE_KV_OFFLOAD"))
        elif backend == "native":
            options["kv_offloading_bytes"] = int(float(size) * GIB)
            if simple and ver >= SIMPLE_OFFLOAD_SINCE:
                remarks.append(ServeRemark("note", "simple-offload", "VLLM_USE_SIMPLE_KV_OFFLOAD=1: "
                                           "SimpleCPUOffloadConnector holds the same blocks (size / ranks per rank), "
                                           "pins exactly that with cudaHostRegister, and logs "
                                           "'SimpleCPUOffloadScheduler: Allocating N CPU blocks'",
                                           "VLLM_USE_SIMPLE_KV_OFFLOAD"))
        elif backend != "lmcache":  # lmcache: serve_settings below
            remarks.append(ServeRemark("warning", "offload-not-planned",
                                       f"--kv-offloading-backend {shown(backend, quote=False)}: "
                                       "kvplan plans the native and lmcache backends only; the GPU plan is unchanged",
                                       "kv_offloading_backend"))
    elif given_backend is not None:
        remarks.append(ServeRemark("note", "not-read", f"--kv-offloading-backend {shown(backend, quote=False)} without "
                                   "--kv-offloading-size: vLLM offloads nothing", "kv_offloading_backend"))
    if simple and (size is None or ver < SIMPLE_OFFLOAD_SINCE):
        remarks.append(ServeRemark("note", "not-read", "VLLM_USE_SIMPLE_KV_OFFLOAD=1 " + (
            "has no effect before vLLM 0.19" if ver < SIMPLE_OFFLOAD_SINCE else
            "without --kv-offloading-size: vLLM offloads nothing"), "VLLM_USE_SIMPLE_KV_OFFLOAD"))
    if settings.get("kv_transfer_config") is not None or (size is not None and backend == "lmcache") or \
            any(key.startswith("lmcache_") for key in settings):  # else serve_settings says nothing: not imported
        from kvplan.engines.vllm.lmcache import serve_settings  # LMCacheConnectorV1 (lmcache.py)

        lmcache, lm_remarks = serve_settings(settings)
        remarks.extend(lm_remarks)
        if lmcache is not None:
            options["lmcache"] = lmcache
    swap = settings.get("swap_space")
    if not v0:
        if swap is not None:
            remarks.append(ServeRemark("note", "not-read", f"--swap-space {swap:g}: vLLM V1 (the engine from 0.8 "
                                       "unless VLLM_USE_V1=0; the only one from 0.11) does not swap to host memory; "
                                       "the flag has no effect", "swap_space"))
    elif swap is not None:
        options["swap_space_bytes"] = int(float(swap) * GIB)
    elif size is None:
        options["swap_space_bytes"] = V0_DEFAULT_SWAP_GIB * GIB
        remarks.append(ServeRemark("note", "default-swap", f"vLLM V0 pins --swap-space {V0_DEFAULT_SWAP_GIB} GiB "
                                   "of host memory per GPU by default (CacheConfig.swap_space); give --swap-space 0 "
                                   "to turn it off", "VLLM_USE_V1" if "VLLM_USE_V1" in settings else "model"))
    if settings.get("language_model_only"):  # no encoder in the profiling run (encoder_profile.py)
        budget["language_model_only"] = True
    gb = settings.get("cpu_offload_gb")
    if gb:
        budget["cpu_offload_bytes"] = int(float(gb) * GIB)
    # envs.VLLM_USE_V1=0 where V1 is the default (0.8 on): the V0 engine's budget (variant.py), refused from 0.11
    if ver >= V1_DEFAULT_SINCE and _env_flag(settings.get("VLLM_USE_V1")) is False:
        budget["vllm_engine"] = "v0"
    # envs.VLLM_USE_V2_MODEL_RUNNER, read from 0.12 (bool(int(...))); unset: the release's choice (runner.py)
    use_v2 = _env_flag(settings.get("VLLM_USE_V2_MODEL_RUNNER"))
    if use_v2 is not None and not v0:
        from kvplan.engines.vllm.runner import V2_SINCE

        if ver >= V2_SINCE:
            budget["model_runner"] = "v2" if use_v2 else "v1"
        elif use_v2:
            remarks.append(ServeRemark("note", "not-read", "VLLM_USE_V2_MODEL_RUNNER=1 has no effect before vLLM "
                                       "0.12 (no Model Runner V2)", "VLLM_USE_V2_MODEL_RUNNER"))
    _sampler(ver, v0, settings.get("VLLM_USE_FLASHINFER_SAMPLER"), budget, remarks,
             bool(settings.get(FLASHINFER_IMAGE)))
    sharing = True
    if v0 and not prefix_off and not settings.get("enable_prefix_caching"):
        sharing = False  # V0's CacheConfig.enable_prefix_caching is False unless the flag is given (V1 sets True)
        remarks.append(ServeRemark("note", "prefix-caching", "vLLM V0 caches no prefixes unless "
                                   "--enable-prefix-caching: a shared prefix is stored once per request",
                                   "VLLM_USE_V1" if "VLLM_USE_V1" in settings else "model"))
    elif prefix_off:
        sharing = False
        remarks.append(ServeRemark("note", "prefix-caching", "prefix caching is off: requests share no KV blocks, "
                                   "a shared prefix is stored once per request", "no_enable_prefix_caching"
                                   if "no_enable_prefix_caching" in settings else "enable_prefix_caching"))
    elif settings.get("enable_prefix_caching"):
        remarks.append(ServeRemark("note", "prefix-caching", "--enable-prefix-caching: common prefixes share whole "
                                   "blocks (requirements.shared_prefix plans it)" + ("" if v0 else
                                                                                     "; V1's default anyway"),
                                   "enable_prefix_caching"))
    return ServeReading(engine_options=tuple(sorted(options.items())), settings=tuple(sorted(budget.items())),
                        sharing=sharing, remarks=tuple(remarks), parallel=expert_parallel(settings))


def _sampler(ver: Any, v0: bool, value: object, budget: dict[str, Any], remarks: list[ServeRemark],
             image: bool = False) -> None:
    """envs.VLLM_USE_FLASHINFER_SAMPLER (topk_topp_sampler.py): 1 takes FlashInfer's top-k/top-p path (where
    flashinfer is installed: assumed, as the variable is set for it); 0 turns it off, so 0.9 - 0.11.0 sort. From
    0.17 a 0 leaves the release's Triton path (kvplan's default). Unset, vLLM's own image (``image``:
    image_settings) has flashinfer, so 0.9 - 0.11.0 take FlashInfer's path on CUDA (sampler.IMAGE); an image other
    than vllm/vllm-openai may or may not carry flashinfer, so the default's assumption is said instead."""
    from kvplan.engines.vllm.sampler import IMAGE, TRITON_SINCE, V1_FLASHINFER_SINCE

    use = _env_flag(value)
    if use is None:
        if image and not v0:
            budget["vllm_sampler"] = IMAGE
        return
    if v0 or ver < V1_FLASHINFER_SINCE:
        remarks.append(ServeRemark("note", "not-read", "VLLM_USE_FLASHINFER_SAMPLER: kvplan plans V0's sampler "
                                   "by its sort path (the V1 sampler reads the variable from 0.8)",
                                   "VLLM_USE_FLASHINFER_SAMPLER"))
    elif use:
        budget["vllm_sampler"] = "flashinfer"
    elif ver < TRITON_SINCE:
        budget["vllm_sampler"] = "sort"


FLASHINFER_IMAGE = "flashinfer_image"  # the setting image_settings gives: the image installs flashinfer


def image_settings(image: str) -> dict[str, Any]:
    """What the deployment's image implies: vLLM's own vllm/vllm-openai image installs flashinfer, so 0.9 - 0.11.0
    take FlashInfer's top-k/top-p path there (sampler.py). vLLM's docker/Dockerfile installs it in stage vllm-base,
    which vllm-openai-base and vllm-openai build on: a FlashInfer wheel or source build at commit 0000977e (May
    2025, the 0.9.0 window; linux/amd64 only then); FlashInfer's AOT build in the Dockerfile of PR #21389 (July
    2025, 0.10.x), whose author writes that the image had long installed flashinfer; v0.3.1 through
    tools/flashinfer-build.sh from PR #25782 (September 2025, 0.11.0). The wheel itself had it only as an extra
    until PR #26443 (October 2025, after 0.11.0). Checked at those commits and PRs, not at each release tag. Another
    image (a build of one's own, a mirror under another name) implies nothing: the default's assumption is said."""
    # matched by hand: no pattern compiled for every image
    from kvplan.engines.serve_format import image_search

    return {FLASHINFER_IMAGE: True} if image_search(r"(^|/)vllm/vllm-openai(:|@|$)", image) else {}


def expert_parallel(settings: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``--enable-expert-parallel`` (``-ep``): the MoE layers own whole experts over EP = tp x dp devices
    (``FusedMoEParallelConfig.make``, model_executor/layers/fused_moe/config.py); attention, dense layers,
    embeddings and lm_head stay per DP rank, split over its tp, and each DP rank is an engine core with its own
    KV cache and scheduler. Without the flag, --data-parallel-size still shards the experts over tp x dp (by
    tensor: ``flatten_tp_across_dp_and_pcp``), the same bytes per GPU: the vLLM engine plans that by default."""
    if settings.get("enable_expert_parallel") and not settings.get("no_enable_expert_parallel"):
        return (("expert_parallel", True),)
    return ()


# --dtype as vLLM reads it (vllm/config/model.py _STR_DTYPE_TO_TORCH_DTYPE; argparse choices auto, half, float16,
# bfloat16, float, float32)
DTYPES = {"half": "float16", "float16": "float16", "float": "float32", "float32": "float32", "bfloat16": "bfloat16"}
# vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS: --dtype half refused, auto never picks float16
NO_FLOAT16 = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})
# --quantization methods vLLM applies to an unquantized checkpoint while loading it (the others read a
# checkpoint's quantization_config): Fp8Config with is_checkpoint_fp8_serialized False
# (model_executor/layers/quantization/fp8.py: Fp8LinearMethod / Fp8OnlineLinearMethod for every LinearBase,
# Fp8MoEMethod for FusedMoE, nothing for VocabParallelEmbedding / ParallelLMHead or norms), and bitsandbytes
# (model_loader/bitsandbytes_loader.py _unquantized_generator: quantize_4bit(compress_statistics=True,
# quant_type="nf4") for every LinearBase weight; 8-bit only from a checkpoint quantized so)
ONLINE = {"fp8": "fp8", "bitsandbytes": "nf4"}
ALLOW_LONG = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def model_dtype(spec: Any, given: object, model_type: str) -> tuple[str, str]:
    """The dtype vLLM loads the model in, and how it was chosen (``ModelConfig._get_and_verify_dtype``)."""
    text = "auto" if given is None else str(given).strip().lower()
    if text == "auto":
        config = spec.dtype
        if config == "float32":
            # _resolve_auto_dtype: "Downcast for float32 models" to the platform's first supported dtype (bfloat16
            # on CUDA GPUs from compute capability 8.0; float16 for pooling models and, in releases before that
            # rule, for every model): 2 bytes either way
            return "bfloat16", "--dtype auto: a float32 checkpoint is loaded as bfloat16 (_resolve_auto_dtype)"
        return config, ""
    if text not in DTYPES:
        raise UsageError(f"{shown(str(given))}: vLLM's --dtype takes auto, half, float16, bfloat16, float or "
                         "float32", field="dtype")
    dtype = DTYPES[text]
    if dtype == "float16" and model_type in NO_FLOAT16:
        raise UsageError(f"'{text}': vLLM refuses float16 for {model_type} (numerical instability; "
                         "_check_valid_dtype): use bfloat16 or float32", field="dtype")
    return dtype, f"--dtype {text}: weights and activations in {dtype}"


def derived_max_len(spec: Any) -> tuple[int, str]:
    """vLLM's longest max_model_len for the model (``vllm/config/model.py`` ``_get_and_verify_max_len``): the
    config's max_position_embeddings (2048 where none), times the rope scaling factor for rope types other than
    su / longrope / llama3 (yarn: its original_max_position_embeddings times the factor); not for gemma3, whose
    limit is already scaled."""
    base = spec.max_position_embeddings or 2048
    rope = spec.rope_scaling
    how = f"max_position_embeddings {base:,}" if spec.max_position_embeddings else "no max_position_embeddings: 2,048"
    if rope is not None and "gemma3" not in spec.model_type and rope.type not in ("su", "longrope", "llama3"):
        factor = rope.factor if rope.factor is not None else 1.0
        if rope.type == "yarn" and rope.original_max_position_embeddings:
            base = rope.original_max_position_embeddings
            how = f"yarn original_max_position_embeddings {base:,}"
        if factor != 1.0:
            return int(base * factor), f"{how} x rope factor {factor:g}"
    return int(base), how


def long_len_allowed(settings: Mapping[str, Any]) -> bool:
    """envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN: ``os.environ.get(...).strip().lower() in ("1", "true")``."""
    value = settings.get(ALLOW_LONG)
    return value is not None and str(value).strip().lower() in ("1", "true")


def read_model(spec: Any, settings: Mapping[str, Any], version: str | None) -> tuple[Any, tuple[ServeRemark, ...]]:
    """The model vLLM loads under ``--dtype`` and ``--quantization`` (``-q``), and whether it starts with the
    max model length given. A refusal comes back as a remark of severity 'error'."""
    from kvplan.budgets.runtime_weights import is_unquantized

    remarks: list[ServeRemark] = []
    dtype, how = model_dtype(spec, settings.get("dtype"), spec.model_type)
    method = settings.get("quantization")
    online = None
    if method is not None:
        name = str(method).strip().lower()
        if not is_unquantized(spec):
            remarks.append(ServeRemark("note", "quantization", f"--quantization {shown(name, quote=False)}: the "
                                       f"checkpoint is already {spec.weights_dtype}; vLLM loads it as stored (and "
                                       "refuses a method that does not match the checkpoint's: "
                                       "ModelConfig._verify_quantization)", "quantization"))
        elif name in ONLINE:
            online = ONLINE[name]
        else:
            remarks.append(ServeRemark("warning", "quantization", f"--quantization {shown(name, quote=False)}: vLLM "
                                       "reads this method from a checkpoint quantized with it, and this checkpoint "
                                       f"is {spec.weights_dtype or spec.dtype}: the weights are planned unquantized",
                                       "quantization"))
    source = {"fp8": "vLLM --quantization fp8: Fp8LinearMethod, quantization/fp8.py",
              "nf4": "vLLM --quantization bitsandbytes: 4-bit nf4, bitsandbytes_loader.py"}.get(online or "",
                                                                                              "vLLM --dtype")
    loaded = loaded_with_remark(spec, dtype, online, source, how, remarks)
    mml = settings.get("max_model_len")
    if isinstance(mml, int) and not isinstance(mml, bool):
        limit, why = derived_max_len(spec)
        if mml > limit:
            if long_len_allowed(settings):
                remarks.append(ServeRemark("warning", "max-model-len-beyond-model", f"--max-model-len {mml:,} is past "
                                           f"the model's {limit:,} ({why}); {ALLOW_LONG}=1 lets vLLM start anyway "
                                           "(its outputs past the trained length may be wrong): planned as given",
                                           "max_model_len"))
            else:
                remarks.append(ServeRemark("error", "max-model-len-beyond-model", f"vLLM refuses to start: "
                                           f"--max-model-len {mml:,} is greater than the model's {limit:,} ({why}; "
                                           "ModelConfig._get_and_verify_max_len). Fix: --max-model-len "
                                           f"{limit:,} or less, or set {ALLOW_LONG}=1 if the model really "
                                           "serves that length", "max_model_len"))
    return loaded, tuple(remarks)


SERVE = ServeFlags(
    engine="vllm",
    commands=("vllm",),
    modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"),
    flags=(
        ("--model", "model"), ("--tensor-parallel-size", "tp"), ("-tp", "tp"), ("--pipeline-parallel-size", "pp"),
        ("-pp", "pp"), ("--data-parallel-size", "dp"), ("-dp", "dp"),
        ("--enable-expert-parallel", "enable_expert_parallel"), ("-ep", "enable_expert_parallel"),
        ("--no-enable-expert-parallel", "no_enable_expert_parallel"), ("--max-model-len", "max_model_len"),
        ("--max-num-seqs", "max_num_seqs"), ("--gpu-memory-utilization", "gpu_memory_utilization"),
        ("--kv-cache-dtype", "kv_cache_dtype"), ("--max-num-batched-tokens", "max_num_batched_tokens"),
        ("--block-size", "block_size"), ("--enforce-eager", "enforce_eager"),
        ("--kv-cache-memory-bytes", "kv_cache_memory"), ("--kv-cache-memory", "kv_cache_memory"),
        ("--config", "config"), ("--speculative-config", "speculative_config"),
        ("--speculative-model", "speculative_model"), ("--num-speculative-tokens", "num_speculative_tokens"),
        ("--kv-offloading-size", "kv_offloading_size"), ("--kv-offloading-backend", "kv_offloading_backend"),
        ("--swap-space", "swap_space"), ("--cpu-offload-gb", "cpu_offload_gb"),
        ("--enable-prefix-caching", "enable_prefix_caching"), ("--no-enable-prefix-caching", "no_enable_prefix_caching"),
        ("--kv-transfer-config", "kv_transfer_config"), ("--quantization", "quantization"), ("-q", "quantization"),
        ("--dtype", "dtype"), ("--language-model-only", "language_model_only"),
    ),
    env_prefixes=("LMCACHE_",),
    booleans=("enforce_eager", "enable_prefix_caching", "no_enable_prefix_caching", "enable_expert_parallel",
              "no_enable_expert_parallel", "language_model_only"),
    floats=("kv_offloading_size", "swap_space", "cpu_offload_gb"),
    reader=read_serve,
    environment=ENVIRONMENT,
    underscores=True,
    images=(r"(^|/)vllm-openai(:|@|$)|(^|/)vllm/vllm-openai|(^|/)vllm-tpu(:|$)",),
    # Ray Serve LLM's engine_kwargs, llm-d's modelCommand vllmServe, the production-stack chart and KServe's
    # llmisvc config all run ``vllm serve``; Dynamo's dynamo.vllm worker and KServe's huggingfaceserver take
    # vLLM's engine flags (AsyncEngineArgs)
    hosts=("ray-serve", "llm-d", "production-stack", "kserve"),
    host_modules=(("dynamo", "dynamo.vllm"), ("kserve", "huggingfaceserver")),
    default_image="vllm/vllm-openai",
    image_settings=image_settings,
    fp8_kv_flag="--kv-cache-dtype fp8",
    parse_int=vllm_int,
    speculation=read_speculation,
    model_reader=read_model,
)
