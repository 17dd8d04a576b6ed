"""vLLM's host-memory KV tiers: V1 native CPU offloading (``--kv-offloading-size``) and V0 swap space
(``--swap-space``).

- V1 (``vllm/config/vllm.py`` ``_post_init_kv_transfer_config``, 0.14+): ``--kv-offloading-size`` GiB, for the
  whole deployment, becomes ``OffloadingConnector`` with ``cpu_bytes_to_use = size x 2^30``;
  ``vllm/v1/kv_offload/cpu/spec.py`` ``CPUOffloadingSpec.__init__``: ``num_blocks = cpu_bytes_to_use //
  (page_size_bytes x len(kv_cache_tensors) x world_size x block_size_factor)``, one page size for all
  groups (it asserts it), the offloaded block as large as the GPU block by default (factor 1). Each
  worker pins its share: ``num_blocks`` blocks of its own layers (0.14-0.26 as torch tensors, each rounded up to a
  power of two by PyTorch: ``engines/vllm/pinned.py``). 0.27 rounds the chunk up to a page and
  keeps one copy of an MLA latent at tp > 1. The flag exists from 0.11.1; 0.11.1-0.13 cannot start the
  native backend (see ``NATIVE_SINCE``). ``VLLM_USE_SIMPLE_KV_OFFLOAD=1`` (0.19+) swaps in
  ``SimpleCPUOffloadConnector``: ``cpu_bytes_to_use // world_size`` per rank, ``num_gpu_blocks x per_rank //
  gpu_total_bytes`` blocks (the same count for these models), pinned exactly with ``cudaHostRegister``, and no
  offloading at all without prefix caching (``engines/vllm/flags.py`` says so for a deployment).
- V0 (before 0.11; ``vllm/worker/worker.py`` ``determine_num_available_blocks``): ``num_cpu_blocks =
  int(swap_space_bytes // CacheEngine.get_cache_block_size(...))``, ``--swap-space`` GiB per GPU
  (default 4), pinned where the platform allows. Checked against a vLLM V0 log (vllm-project/vllm PR
  #12126): Llama-3.2-11B-Vision (40 layers x 8 KV heads x 128, bf16; 2,621,440 B per 16-token block)
  logged ``# CPU blocks: 1638`` for the default 4 GiB (tests/test_offload.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.budgets.base import weights_on_gpu  # noqa: F401 - shared with SGLang's budget; imported from here before
from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.offload import OffloadTier, find_link, uniform_token_bytes
from kvplan.engines.protocol import Demand
from kvplan.engines.version import Version
from kvplan.engines.vllm.pinned import pinned_allocation_bytes, tensor_sets, torch_tensor_tiers
from kvplan.errors import UsageError
from kvplan.spec import MLA

V1_SINCE = (0, 11)  # V0 (and --swap-space) removed in v0.11.0
# --kv-offloading-size / --kv-offloading-backend: vllm-project/vllm PR #27621 ("cmdline argument parsing for KV
# cache offloading modules"); absent from the v0.11.0 wheel, in v0.11.1's vllm/config/cache.py CacheConfig.
FLAGS_SINCE = (0, 11, 1)
# v0.11.1-v0.13.x: offloading only with --kv-offloading-backend (default None), and 'native' passes
# {"num_cpu_blocks": 0} (vllm/config/vllm.py _post_init_kv_transfer_config), which vllm/v1/kv_offload/cpu.py
# CPUOffloadingSpec refuses ("num_cpu_blocks must be specified"). v0.14.0: backend 'native' by default
# (PR #32421) and cpu_bytes_to_use = size x 2^30 (PR #24498), the rule below.
NATIVE_SINCE = (0, 14)
# v0.27.0 (vllm/v1/kv_offload/cpu/spec.py CPUOffloadingSpec.create_worker): on CUDA the tier is one
# SharedOffloadRegion (mmap, pinned with cudaHostRegister), a chunk's bytes rounded up to mmap.PAGESIZE, and MLA at
# tp > 1 stores one replica (replicated_layout, distributed/kv_transfer/.../offloading/config.py); read in every
# wheel 0.27.0-0.33.0. 0.26.0's create_worker passes no region: the worker allocates torch tensors.
SHARED_REGION_SINCE = (0, 27)
PAGE = 4096  # mmap.PAGESIZE on x86-64 Linux (aarch64 kernels with 64 KiB pages, as on some GH200 hosts, round more)
GIB = 1 << 30


def _block_bytes(layout: CacheLayout, block: int) -> int:
    """One block of every layer one rank of this stage holds (page_size_bytes x kv_cache_tensors)."""
    return uniform_token_bytes(layout, "vLLM's host offload tiers (one page size)", "kv_offloading_bytes") * block


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def offload_tier(layouts: Sequence[CacheLayout], version: Version, options: EngineOptions, tp: int,
                 demand: Demand) -> OffloadTier | None:
    if options.kv_offloading_bytes is None and options.swap_space_bytes is None:
        return None
    if options.kv_offloading_bytes is not None and options.swap_space_bytes is not None:
        raise UsageError("--swap-space is vLLM V0's, --kv-offloading-size V1's: give one", field="swap_space_bytes")
    block = layouts[0].block_size or 16
    per_rank = [_block_bytes(layout, block) for layout in layouts]  # one per pipeline stage
    world = tp * len(layouts)
    link = find_link(options.offload_link)
    request_blocks = -(-demand.max_model_len // block)
    remarks: list[str] = []
    pinned_range: tuple[int, int] | None = None
    if options.kv_offloading_bytes is not None:
        if version < FLAGS_SINCE:
            raise UsageError("--kv-offloading-size came with vLLM 0.11.1; older releases offload with "
                             "--kv-transfer-config (V1) or --swap-space (V0)", field="kv_offloading_bytes")
        if version < NATIVE_SINCE:
            raise UsageError("vLLM 0.11.1 to 0.13 fail to start with --kv-offloading-backend native (the "
                             "OffloadingConnector gets num_cpu_blocks 0) and ignore --kv-offloading-size without a "
                             "backend; native offloading works from 0.14", field="kv_offloading_bytes")
        if options.kv_offloading_bytes == 0:
            # vllm/config/vllm.py _post_init_kv_transfer_config enables offloading for any size that is not None,
            # 0 included; vllm/v1/kv_offload/cpu.py (cpu/spec.py from 0.26) CPUOffloadingSpec.__init__ then raises
            # "cpu_bytes_to_use must be specified" on a falsy size (0.14-0.33): the engine does not start
            raise UsageError("0 GiB: vLLM fails to start with it (CPUOffloadingSpec: "
                             "'cpu_bytes_to_use must be specified'); leave the flag out for no host tier",
                             field="kv_offloading_bytes")
        host = options.kv_offloading_bytes
        mla = all(isinstance(g.layer, MLA) for layout in layouts for g in layout.groups)
        if version >= SHARED_REGION_SINCE:
            replicated = mla and tp > 1 and len(layouts) == 1
            copies = 1 if replicated else world
            chunk = _round_up(per_rank[0] * copies, PAGE)
            blocks = host // chunk
            pinned = held = blocks * chunk  # one shared region, registered page by page: no rounding beyond the page
            if replicated:
                remarks.append(f"vLLM {'.'.join(map(str, SHARED_REGION_SINCE))}+ keeps one copy of an MLA "
                               f"model's latent for all {tp} tensor-parallel ranks (replicated_layout; assumed: the "
                               "'mp' executor on one node)")
        else:
            blocks = host // (per_rank[0] * world)
            held = blocks * tp * sum(per_rank)
            pinned_range, said = torch_tensor_tiers(layouts, version, tp, blocks, block)
            pinned = pinned_range[1]
            remarks.extend(said)
        kind = "vLLM native CPU offloading (OffloadingConnector)"
    else:
        if version >= V1_SINCE:
            raise UsageError("--swap-space was vLLM V0's (before 0.11); V1 offloads with --kv-offloading-size",
                             field="swap_space_bytes")
        assert options.swap_space_bytes is not None  # neither given returned None above
        host = options.swap_space_bytes
        blocks = host // max(per_rank)  # per GPU; the most loaded stage decides what every rank logs
        held = blocks * tp * sum(per_rank)
        # vllm/worker/cache_engine.py CacheEngine._allocate_kv_cache (read in 0.8.5 and 0.10.1.1): the CPU cache is
        # one torch.zeros(..., pin_memory=is_pin_memory_available()) per attention layer of num_cpu_blocks blocks,
        # each rounded up to a power of two by PyTorch's pinned allocator (engines/vllm/pinned.py)
        per_layer = tensor_sets(layouts, blocks, block)[1]
        pinned = tp * sum(pinned_allocation_bytes(size) for size in per_layer)
        host = host * world
        kind = "vLLM V0 swap space (per GPU)"
        remarks.append(f"vLLM V0 logs '# CPU blocks: {blocks}' (worker.py determine_num_available_blocks)")
        remarks.append(f"vLLM V0 pins the swap space as one torch tensor per attention layer "
                       f"({max(per_layer, default=0):,} B the largest; CacheEngine._allocate_kv_cache); PyTorch's "
                       "pinned allocator rounds each up to a power of two (CachingHostAllocator PowerOf2Ceil): "
                       f"{pinned:,} B pinned for {held:,} B of "
                       "blocks (assumed: a platform where vLLM pins, PyTorch's default PYTORCH_ALLOC_CONF)")
    request_bytes = request_blocks * max(per_rank)
    return OffloadTier(kind=kind, host_bytes=host, blocks=blocks, block_size=block, tokens=blocks * block,
                       pinned_bytes=pinned, requests=blocks // request_blocks if request_blocks else 0,
                       request_bytes_per_gpu=request_bytes, link=link,
                       restore_seconds=request_bytes / link.bytes_per_s, remarks=tuple(remarks), held_bytes=held,
                       pinned_range=pinned_range)
