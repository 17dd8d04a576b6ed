"""Pinned host memory of vLLM's native CPU offloading tier in the releases that allocate it as torch tensors
(0.14 to 0.26): which tensors each worker allocates, and what PyTorch's pinned allocator reserves for them.

- **The tensors.** ``OffloadingConnector.prefer_cross_layer_blocks`` is True (0.14-0.26), so the V1 model runner
  allocates one cross-layer KV tensor for all layers when ``use_uniform_kv_cache`` holds
  (``vllm/v1/worker/kv_connector_model_runner_mixin.py``): one KV-cache group, one attention backend, and a
  backend whose ``get_kv_cache_stride_order(include_num_layers_dimension=True)`` adds a layers dimension (from
  0.18 also: not as the outermost one; 0.24+ spells it ``indexes_kv_by_block_stride``). The connector then
  registers that one tensor (``register_cross_layers_kv_cache``), and the worker allocates ONE CPU tensor of
  ``num_cpu_blocks`` x (every layer's page) bytes. Otherwise the connector gets one GPU tensor per layer
  (``register_kv_caches``) and the worker allocates one CPU tensor per layer of ``num_cpu_blocks`` x that layer's
  page (0.14-0.19 ``kv_offload/worker/cpu_gpu.py`` ``CpuGpuOffloadingHandlers``: the GPU shape with its block
  dimension replaced, K and V together whatever the backend's order; 0.21-0.26 ``kv_offload/cpu/gpu_worker.py``
  ``CPUOffloadingWorker``: ``torch.zeros((num_cpu_blocks, page x blocks_per_chunk), int8, pin_memory=True)``
  per canonical tensor).
- **Which backends.** FLASH_ATTN, FLASHINFER and TRITON_ATTN give a layered order with the blocks outermost in
  every release read (0.14-0.26); ROCM_ATTN, ROCM_AITER_FA and FLEX_ATTENTION define none (0.21: per layer). MLA: ``MLACommonBackend`` gives ``(1, 0, 2, 3)`` in 0.14-0.17; from 0.18 the
  shared default in ``model_executor/layers/attention/mla_attention.py`` is ``(0, 1, 2, 3)`` (layers outermost:
  no cross-layer tensor) and from 0.24 FLASHMLA, FLASH_ATTN_MLA, CUTLASS_MLA, FLASHINFER_MLA and TRITON_MLA
  override it with ``(1, 0, 2, 3)``.
- **The runner.** The V2 model runner (``vllm/v1/worker/gpu/kv_connector.py``: "TODO: support
  cross_layers_kv_cache") always registers per-layer tensors. It is off by default up to 0.21
  (``VLLM_USE_V2_MODEL_RUNNER`` default 0) and the default for some architectures from 0.22
  (``VllmConfig._is_default_v2_model_runner_model``: 0.22 Qwen3ForCausalLM; 0.23 also Llama and Mistral, dense and
  unquantized; 0.24 those and DeepseekV2, Qwen2Moe, GraniteMoe; 0.25-0.26 every model that is not MoE, hybrid
  or attention-free, and those three MoE). kvplan does not carry the architecture into the tier, so from 0.22
  it gives both figures and plans the larger.
- **The rounding.** PyTorch's ``CachingHostAllocatorImpl::allocate`` (``aten/src/ATen/core/CachingHostAllocator.h``,
  read in torch 2.13) allocates ``c10::llvm::PowerOf2Ceil(size)`` bytes for every request and pins all of them
  (``allocate_host_memory(roundSize, ...)``, with ``cudaHostAlloc`` or, under ``pinned_use_cuda_host_register``,
  malloc + ``cudaHostRegister`` of the same rounded size). torch 2.13 skips the rounding above
  ``PYTORCH_ALLOC_CONF=pinned_max_round_threshold_mb:N`` or ``pinned_max_cached_size_mb:N`` (both unlimited by
  default); ``pinned_use_background_threads`` changes nothing here. kvplan assumes the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.layout import CacheLayout
from kvplan.engines.version import Version
from kvplan.spec import MLA

CROSS_LAYER_MLA_UNTIL = (0, 18)  # 0.18: mla_attention.py's layered order keeps num_layers outermost
CROSS_LAYER_MLA_AGAIN = (0, 24)  # 0.24: the MLA backends override it with (1, 0, 2, 3)
V2_RUNNER_SINCE = (0, 22)  # 0.22: the V2 model runner is the default for some architectures


def pinned_allocation_bytes(size: int) -> int:
    """Bytes PyTorch's CachingHostAllocator reserves for a pinned tensor of ``size`` bytes (PowerOf2Ceil; 0 for
    an empty tensor, which it does not allocate)."""
    return 0 if size <= 0 else 1 << (size - 1).bit_length()


def _layer_pages(layout: CacheLayout, block: int) -> list[int]:
    """One rank's page per layer (K and V, or the MLA latent), in bytes."""
    return [g.token.bytes * block for g in layout.groups for _ in range(g.count)]


def tensor_sets(layouts: Sequence[CacheLayout], blocks: int, block: int) -> tuple[list[int], list[int]]:
    """The CPU tensors' bytes on every rank of one tensor-parallel group, per layout: (cross-layer, per-layer)."""
    cross = [blocks * sum(_layer_pages(layout, block)) for layout in layouts]
    per_layer = [blocks * page for layout in layouts for page in _layer_pages(layout, block)]
    return cross, per_layer


def _settled(version: Version, mla: bool) -> str | None:
    """'cross' or 'layers' where the release's default runner and backend settle the tensor set, else None."""
    if mla:
        if version < CROSS_LAYER_MLA_UNTIL:
            return "cross"
        if version < CROSS_LAYER_MLA_AGAIN:
            return "layers"  # V1 (flat MLA order) and V2 (per layer) agree
        return None  # V1 with FLASHMLA & co: cross-layer; V2 (DeepseekV2ForCausalLM's default): per layer
    return "cross" if version < V2_RUNNER_SINCE else None


def torch_tensor_tiers(layouts: Sequence[CacheLayout], version: Version, tp: int, blocks: int,
                       block: int) -> tuple[tuple[int, int], list[str]]:
    """(least, most) pinned bytes of the whole deployment, and the notes that say why."""
    cross, per_layer = tensor_sets(layouts, blocks, block)
    cross_bytes = tp * sum(pinned_allocation_bytes(s) for s in cross)
    layer_bytes = tp * sum(pinned_allocation_bytes(s) for s in per_layer)
    held = tp * sum(cross)
    mla = all(isinstance(g.layer, MLA) for layout in layouts for g in layout.groups)
    settled = _settled(version, mla)
    rounding = ("PyTorch's pinned allocator rounds each pin_memory=True tensor up to a power of two "
                "(CachingHostAllocator PowerOf2Ceil; vllm-project/vllm PR #48436: 40 GiB per worker took 64 GiB)")
    if settled == "cross":
        notes = [f"this vLLM release allocates the tier as one cross-layer torch tensor per worker of "
                 f"{max(cross):,} B; {rounding}: {cross_bytes:,} B pinned for {held:,} B of blocks (assumed: the "
                 "V1 model runner and an NVIDIA GPU's default attention backend, which has a layered stride order: "
                 "FLASH_ATTN, FLASHINFER, TRITON_ATTN, the MLA backends; ROCM_ATTN, ROCM_AITER_FA and FLEX_ATTENTION "
                 "have none and give one tensor per layer; PyTorch's default PYTORCH_ALLOC_CONF)"]
        return (cross_bytes, cross_bytes), notes
    count = sum(g.count for g in layouts[0].groups)
    if settled == "layers":
        notes = [f"this vLLM release allocates the tier as one torch tensor per layer ({count} on a worker, "
                 f"{max(per_layer):,} B the largest; MLA's layered stride order keeps layers outermost, so no "
                 f"cross-layer tensor); {rounding}: {layer_bytes:,} B pinned for {held:,} B of blocks (assumed: "
                 "PyTorch's default PYTORCH_ALLOC_CONF)"]
        return (layer_bytes, layer_bytes), notes
    low, high = sorted((cross_bytes, layer_bytes))
    notes = [f"this vLLM release allocates the tier as torch tensors: one cross-layer tensor per worker with the V1 "
             f"model runner ({cross_bytes:,} B pinned), one per layer with the V2 model runner, which it picks by "
             f"architecture from 0.22 ({layer_bytes:,} B pinned); {rounding}; kvplan plans {high:,} B for "
             f"{held:,} B of blocks (assumed: PyTorch's default PYTORCH_ALLOC_CONF)"]
    return (low, high), notes


# 0.27 (kv_offload/cpu/spec.py create_worker): the worker's CPU tensors are views of one SharedOffloadRegion (mmap,
# registered with cudaHostRegister page by page): still logged as "Allocating N CPU tensors", no torch rounding
MMAP_REGION_SINCE = (0, 27)


def logged_tensors_note(count: int, sizes: Sequence[int] | None, version: Version | None) -> str:
    """What the native connector's "Allocating N CPU tensors..." (``CPUOffloadingWorker`` /
    ``CpuGpuOffloadingHandlers``, 0.11-0.33, per worker) says about pinned memory, with the tensors' bytes where
    vLLM's DEBUG lines give them (``sizes``, one per tensor)."""
    what = ("one cross-layer tensor for all layers (the V1 model runner with a layered attention backend)"
            if count == 1 else "one per layer (per registered KV tensor: the V2 model runner, a backend without a "
            "layered stride order, or a release before 0.14)")
    said = f"{count:,} CPU tensor{'s' if count != 1 else ''} per worker: {what}"
    if version is not None and version >= MMAP_REGION_SINCE:
        return said + ("; from vLLM 0.27 they are views of one mmap region pinned page by page (cudaHostRegister), "
                       "not rounded to a power of two")
    rounding = "PyTorch's pinned allocator rounds each up to a power of two (CachingHostAllocator PowerOf2Ceil)"
    if version is None:
        rounding += " in vLLM 0.14-0.26 (0.27+: views of one mmap region, not rounded)"
    if sizes and len(sizes) >= count:
        total, pinned = sum(sizes[:count]), sum(pinned_allocation_bytes(s) for s in sizes[:count])
        return said + f"; {total:,} B of tensors, {pinned:,} B pinned per worker: {rounding}"
    return said + f"; {rounding} (their sizes are in vLLM's DEBUG lines only: VLLM_LOGGING_LEVEL=DEBUG)"
