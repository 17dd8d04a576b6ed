"""SGLang's default ``mem_fraction_static``, release by release.

Every rule below was read in the released wheels (``sglang/srt/server_args.py``, ``ServerArgs``) of the
releases named; a range's ends are the first and last release read with that code. ``gpu_mib`` is what
SGLang's ``get_device_memory_capacity`` returns: ``nvidia-smi --query-gpu=memory.total`` in MiB (the least
over the GPUs), about 0.5 GiB more than torch's total; kvplan passes the catalog's torch figure (said).
"""

from __future__ import annotations

from collections.abc import Callable

from kvplan.engines.version import Version
from kvplan.record import dataclass

# model types whose prefill (piecewise) CUDA graphs SGLang turns off (configs/model_config.py,
# piecewise_cuda_graph_disabled_model_archs and is_deepseek_nsa, 0.5.10)
PIECEWISE_OFF_MODEL_TYPES = frozenset({"deepseek_v32", "qwen3_next", "glm_moe_dsa", "bailing_moe_v2_5", "llada"})


@dataclass(frozen=True)
class FractionInputs:
    """What SGLang's default fraction reads."""

    gpu_mib: float
    tp: int = 1
    pp: int = 1
    speculative: str | None = None
    """kvplan's method name (draft_model = STANDALONE, ngram = NGRAM, others EAGLE-like), None without."""
    mla: bool = False
    model_type: str = ""
    model_id: str = ""
    """The model path: SGLang caps Llama 2's prefill graphs at 4,096 tokens ("llama-2" in it)."""
    chunked_prefill_size: int | None = None
    """--chunked-prefill-size where given (kvplan's max_num_batched_tokens)."""
    context_length: int | None = None
    enforce_eager: bool = False
    cpu_offload: bool = False
    amd: bool = False
    """An AMD GPU (ROCm): SGLang captures no prefill graphs on non-CUDA hardware."""
    multimodal: bool = False
    """Served as a multimodal model (SGLang captures no prefill graphs for those)."""


@dataclass(frozen=True)
class Fraction:
    value: float
    reserved_mib: float | None
    """MiB kept outside the fraction, where the rule reserves a size (None: a fixed fraction)."""
    source: str
    notes: tuple[str, ...] = ()
    reads_gpu: bool = True
    """Whether the GPU's size entered the value (not for the tp tables)."""


def _tp_table(parallel: int) -> float:
    return 0.79 if parallel >= 16 else 0.81 if parallel >= 8 else 0.85 if parallel >= 4 else \
        0.87 if parallel >= 2 else 0.88


def _before_046(x: FractionInputs) -> Fraction:
    # 0.4.3 - 0.4.5 ServerArgs.__post_init__: by tp alone
    return Fraction(_tp_table(x.tp), None, "server_args.py ServerArgs.__post_init__ (read in 0.4.3 - 0.4.5; "
                    "older releases assumed the same): by tp", reads_gpu=False)


def _rule_046(x: FractionInputs) -> Fraction:
    # 0.4.6 ServerArgs.__post_init__: the tp table up to 80 GiB, else 13 GiB kept (not rounded)
    if x.gpu_mib <= 81920:
        return Fraction(_tp_table(x.tp), None, "server_args.py ServerArgs.__post_init__ (0.4.6): by tp up to 80 GiB")
    return Fraction((x.gpu_mib - 13 * 1024) / x.gpu_mib, 13 * 1024.0,
                    "server_args.py ServerArgs.__post_init__ (0.4.6): 13 GiB kept above 80 GiB")


def _rule_047(x: FractionInputs) -> Fraction:
    # 0.4.7 ServerArgs.__post_init__: the table by tp x pp up to 80 GiB, 0.88 above; over 180,000 MiB 0.79;
    # over 96 GiB min(f + 48 GiB x (1 - f) / gpu, (gpu - 18 GiB) / gpu) (20 GiB with a draft); else x 0.95
    # with a draft
    src = "server_args.py ServerArgs.__post_init__ (0.4.7)"
    f = _tp_table(x.tp * x.pp) if x.gpu_mib <= 81920 else 0.88
    if x.gpu_mib > 180 * 1000:
        return Fraction(0.79, None, src)
    if x.gpu_mib > 96 * 1024:
        keep = (20 if x.speculative else 18) * 1024
        return Fraction(min(f + 48 * 1024 * (1 - f) / x.gpu_mib, (x.gpu_mib - keep) / x.gpu_mib), None, src)
    return Fraction(f * 0.95 if x.speculative else f, None, src)


def _tiers(x: FractionInputs, version: Version) -> Fraction:
    # 0.4.8 - 0.5.2 ServerArgs.__post_init__: MiB kept by GPU tier, (2.8 + tp x pp / 10) GiB below 35 GiB,
    # (9.5 + tp x pp / 2) below 90, (12 + tp x pp / 2) below 160, 32 GiB above; a draft 2 GiB more (0.5.2:
    # STANDALONE 6 GiB); rounded to 3 decimals
    parallel = x.tp * x.pp
    gib = x.gpu_mib / 1024
    reserved = (2.8 + parallel / 10) * 1024 if gib < 35 else (9.5 + parallel / 2) * 1024 if gib < 90 else \
        (12 + parallel / 2) * 1024 if gib < 160 else 32 * 1024.0
    if x.speculative is not None:
        reserved += 6 * 1024 if x.speculative == "draft_model" and version >= (0, 5, 2) else 2 * 1024
    return Fraction(round((x.gpu_mib - reserved) / x.gpu_mib, 3), reserved,
                    "server_args.py ServerArgs.__post_init__ (0.4.8 - 0.5.2): MiB kept by GPU tier")


def gpu_bucket(gpu_mib: float, tp: int, version: Version) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) ``_handle_gpu_memory_settings`` picks (0.5.3 on).

    The 20 - 35 GiB tier's decode graphs at tp < 4: 16 in 0.5.3 - 0.5.4, 24 from 0.5.5."""
    small_tp = tp < 4
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        return 2048, (24 if version >= (0, 5, 5) else 16) if small_tp else 80
    if gpu_mib < 60 * 1024:
        return 4096, 32 if small_tp else 160
    if gpu_mib < 160 * 1024:
        return 8192, 256 if small_tp else 512
    return 16384, 512


def prefill_graph_sizes(max_tokens: int) -> int:
    """How many prefill (piecewise) CUDA graphs SGLang captures up to ``max_tokens``
    (``_generate_piecewise_cuda_graph_tokens``, 0.5.10; ``_generate_prefill_cuda_graph_batch_sizes`` 0.5.14)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return sum(1 for s in sizes if s <= max_tokens)


def prefill_graphs_on(x: FractionInputs, version: Version) -> bool:
    """Prefill graphs are on by default from 0.5.10 (``disable_piecewise_cuda_graph``; before, opt-in), off
    with speculation, pp > 1, CPU weight offload, non-CUDA hardware (AMD), multimodal models and the models SGLang
    lists (``_handle_piecewise_cuda_graph``, conditions 1, 2, 5, 6, 9 and 12 in 0.5.10); --disable-cuda-graph turns
    them off from 0.5.14 (``cuda_graph_config``: both phases DISABLED)."""
    return (version >= (0, 5, 10) and x.speculative is None and x.pp == 1 and not x.cpu_offload and not x.amd
            and not x.multimodal and x.model_type not in PIECEWISE_OFF_MODEL_TYPES
            and not (x.enforce_eager and version >= (0, 5, 14)))


def _buckets(x: FractionInputs, version: Version) -> Fraction:
    # 0.5.3 on, ServerArgs._handle_gpu_memory_settings (0.5.19 on: arg_groups/memory_hook.py): 512 +
    # max(chunked prefill, 2048) x 1.5 + decode graphs' max bs x 2 + tp x pp / 8 GiB + prefill graphs
    # (0.5.10 on: 8 MiB each, MLA 1.5 GiB), at least 10 GiB on GPUs over 60 GiB; then a draft's reserve
    # (0.5.3 - 0.5.9: STANDALONE 6 GiB, NGRAM none, others 2 GiB; 0.5.10 - 0.5.13: 6 / none / 4 GiB;
    # 0.5.14 on: none, the pool holds the draft)
    notes: list[str] = []
    chunked, graph_bs = gpu_bucket(x.gpu_mib, x.tp, version)
    chunked = x.chunked_prefill_size or chunked
    reserved = 512 + max(chunked, 2048) * 1.5
    if not (x.enforce_eager and version >= (0, 5, 15)):  # 0.5.15: only when decode graphs are captured
        reserved += graph_bs * 2
    reserved += x.tp * x.pp / 8 * 1024
    if prefill_graphs_on(x, version):
        if x.mla:
            reserved += 1.5 * 1024
        else:
            max_tokens = min(chunked, 4096) if "llama-2" in x.model_id.lower() else chunked
            if x.context_length is not None and version >= (0, 5, 14):  # clamped to --context-length
                max_tokens = min(max_tokens, x.context_length)
            reserved += prefill_graph_sizes(max_tokens) * 8
    if x.gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if x.speculative not in (None, "ngram") and version < (0, 5, 14):
        reserved += 6 * 1024 if x.speculative == "draft_model" else 4 * 1024 if version >= (0, 5, 10) else 2 * 1024
    if x.enforce_eager and version < (0, 5, 15):
        notes.append("SGLang before 0.5.15 keeps the decode CUDA graphs' reserve with --disable-cuda-graph")
    return Fraction(round((x.gpu_mib - reserved) / x.gpu_mib, 3), reserved,
                    "server_args.py ServerArgs._handle_gpu_memory_settings (0.5.3 on; 0.5.19 on: "
                    "arg_groups/memory_hook.py)", tuple(notes))


Rule = Callable[[FractionInputs, Version], Fraction]

# (first release, rule): the newest entry at or below the asked release applies
RULES: tuple[tuple[Version, Rule], ...] = (
    ((0, 0, 0), lambda x, v: _before_046(x)),
    ((0, 4, 6), lambda x, v: _rule_046(x)),
    ((0, 4, 7), lambda x, v: _rule_047(x)),
    ((0, 4, 8), _tiers),
    ((0, 5, 3), _buckets),
)


def default_fraction(inputs: FractionInputs, version: Version) -> Fraction:
    rule = next(r for since, r in reversed(RULES) if version >= since)
    return rule(inputs, version)


# SGLang's multimodal architectures among kvplan's model types; their towers' shapes are kept with the model
# sources (kvplan/sources/vision_towers.py, read in tests/data/hf_configs)
MULTIMODAL_TYPES = frozenset({"gemma3", "gemma4", "llama4"})


# configs/model_config.py mm_disabled_models (read in 0.4.6, 0.4.10, 0.5.8, 0.5.17; absent in 0.4.5): Gemma 3 and
# Llama 4 are served text-only unless --enable-multimodal, so no multimodal fraction rule applies to them
TEXT_ONLY_SINCE = {"gemma3": (0, 4, 6), "llama4": (0, 4, 6)}
TEXT_ONLY_NOTE = ("SGLang >= 0.4.6 serves Gemma 3 and Llama 4 text-only unless --enable-multimodal "
                  "(model_config.py mm_disabled_models); with it, SGLang also lowers mem_fraction_static, which "
                  "kvplan does not plan")


def text_only_by_default(model_type: str, version: Version) -> bool:
    since = TEXT_ONLY_SINCE.get(model_type)
    return since is not None and version >= since


def vision_tower(model_type: str, model_id: str) -> tuple[int, int] | None:
    """(layers, hidden size) of the model's vision tower where SGLang serves it as multimodal, else None."""
    if model_type not in MULTIMODAL_TYPES:
        return None
    from kvplan.sources import vision_towers as towers  # here: a text model's plan needs no tower table

    tower = towers.vision_tower(model_type, model_id)
    return (tower.layers, tower.hidden) if tower is not None else None


def multimodal_factor(tower: tuple[int, int] | None, version: Version, default: bool) -> tuple[float, str] | None:
    """What SGLang multiplies mem_fraction_static by for a multimodal model, and where (None: nothing).

    0.3.6 - 0.4.4 (read in 0.3.6, 0.4.0 - 0.4.4): ``ModelRunner.__init__`` x 0.95, given or default; 0.4.5 - 0.4.8:
    x 0.90; 0.4.9: nothing; 0.4.10 on (read in 0.4.10, 0.5.3 - 0.5.8, 0.5.13, 0.5.17; later releases assumed the
    same): ``ServerArgs.adjust_mem_fraction_for_vlm`` on the default fraction only, x 0.95 x (1 - 0.1 x (layers x
    hidden^2 / (24 x 1024^2) - 1)), the second factor kept within 0.8 - 1.05 (a ViT-L/14 tower is 1)."""
    if tower is None or (0, 4, 9) <= version < (0, 4, 10):
        return None
    if version < (0, 4, 5):
        return 0.95, "model_runner.py ModelRunner.__init__ (0.4.4 and older): x 0.95 for a multimodal model"
    if version < (0, 4, 9):
        return 0.90, "model_runner.py ModelRunner.__init__ (0.4.5 - 0.4.8): x 0.90 for a multimodal model"
    if not default:
        return None
    layers, hidden = tower
    ratio = layers * hidden**2 / (24 * 1024**2)
    factor = 0.95 * max(0.8, min(1.05, 1 - 0.1 * (ratio - 1)))
    return factor, (f"server_args.py adjust_mem_fraction_for_vlm (0.4.10 on): the default fraction x {factor:.4f} "
                    f"for a {layers}-layer, {hidden:,}-wide vision tower")
