"""Collective-communication buffers a TP > 1 vLLM worker allocates after its init snapshot: computed, not fitted.

vLLM counts them in ``non_torch_increase`` (utils/mem_utils.py; from 0.27 in ``total_consumed``) because their
owners are FlashInfer and NCCL, not torch's caching allocator. Two of them can be sized from code; the rest of
the TP > 1 growth (TP 1's growth, NCCL's ring buffers for torch's lazily created communicator) stays fitted
(fitted.py ``non_torch_tp``). Full derivation with citations: docs/research-vllm-collectives.md.

1. FlashInfer all-reduce + RMSNorm fusion workspace (vLLM >= 0.17, on by default at -O2).
   vLLM 0.19.0 ``config/vllm.py:116-135`` ``enable_allreduce_rms_fusion``: TP > 1, CUDA, FlashInfer installed,
   capability 9.0 or the 10.x family, DP = 1, PP = 1; ``--enforce-eager`` turns torch.compile (and the pass)
   off (``config/vllm.py:847-853``). ``compilation/passes/fusion/allreduce_rms_fusion.py:54-71`` sizes it per
   capability and TP (``FI_ALLREDUCE_FUSION_MAX_SIZE_MB``; TP 2/4/8 only, ``config/compilation.py``
   ``flashinfer_max_size``, :175) and :759-780 takes
   ``max_token_num = min(max_size // (H x 2), max_num_batched_tokens)``.
   The pass is built during torch.compile in the profiling run, after the snapshot.
   FlashInfer 0.6.4-0.6.16 ``comm/trtllm_ar.py`` ``trtllm_create_ipc_workspace_for_all_reduce_fusion``: three
   buffers, ``tp x T x H x 2``, ``tp x 256 x 4`` (flags) and ``3 x tp x T x H x 2`` (Lamport), each a
   ``SymmDeviceMemory`` (``comm/mnnvl.py``): ``round_up(size + 2048, 2 MiB)``. Up to FlashInfer 0.6.14 (vLLM
   0.17-0.26) that class also rounds every buffer up to the *recommended multicast granularity* and refuses a
   GPU without multicast (0.6.6 ``comm/mnnvl.py`` ``_get_allocation_prop``, and the check in ``__init__``), so
   only NVSwitch GPUs get it, and each buffer takes a whole granule; from 0.6.15 (commit 68ebdbd6e, vLLM >= 0.27)
   the rounding and the check apply to multicast buffers only, which the trtllm workspace's are not.
2. NCCL NVLS (NVLink SHARP) buffers, NVSwitch GPUs with multicast, TP > 2 (NCCL ``src/transport/nvls.cc``
   ``ncclNvlsInit``: off at ``gpuCount <= 2``). NCCL 2.21+ (torch 2.7.1 bundles 2.26.2, 2.8 2.27.3, 2.10 2.27.5):
   ``nvlsPerRankSize = nChannels x 2 x (NVLS_CHUNKSIZE 128 KiB x NCCL_STEPS 8)``, ``nvlsTotalSize = that x nHeads``
   (one head per local rank), rounded to the 2 MiB allocation granularity (2.27.5 nvls.cc:146-152, 316-342;
   ``NVLS_NCHANNELS_SM90`` 16, ``_SM100_NVL`` 24 from 2.27, 32 in 2.26). With cuMem on (NCCL's default, which
   vLLM stops overriding in 0.10.2) NCCL connects each algorithm on its first use (init.cc:1148
   ``runtimeConn``), which for NVLS is the profiling run's first large all-reduce, after the snapshot.
   Counted once (for one communicator).

3. Before 0.11: vLLM's own TP communicators, made after the init snapshot (vLLM 0.10.0-0.10.2
   ``v1/worker/gpu_worker.py`` ``Worker.init_device``: ``MemorySnapshot()`` (0.10.1.1:174), then
   ``init_worker_distributed_environment`` (:192); 0.11.0 swaps them, :169 before :182, to leave NCCL's buffers out
   of the measurement). ``ensure_model_parallel_initialized`` builds the TP group's ``CudaCommunicator``
   (``distributed/device_communicators/cuda_communicator.py:49-62``): a ``PyNcclCommunicator`` (NCCL init plus a
   1-element warm-up all-reduce, ``pynccl.py:105-106``) and a ``CustomAllreduce``. The EP group gets neither
   (``use_pynccl = "ep" not in unique_name``); the symmetric-memory all-reduce is off (0.10.2 envs.py:1220, absent
   before) and quick all-reduce is ROCm only. So the growth holds, on top of 0.11's:
   a. the custom all-reduce's two IPC buffers (``custom_all_reduce.py:157-162``, ``cudaMalloc`` in
      ``ops.allocate_shared_buffer_and_handle``, not torch): ``meta_size() + max_size`` and ``max_size``,
      ``max_size = 8192 x 1024`` (:57); ``meta_size`` (``sizeof(Signal)``) is a few KiB, so with the 2 MiB page
      rounding 10 + 8 = 18 MiB. Its 8 MiB ``rank_data`` is a torch tensor made before the profile's baseline: in
      neither the growth nor the torch peak increase. Built for TP 2, 4, 6, 8 when the GPUs are all NVLink-connected
      or TP is 2 (:97-158); kvplan counts it on NVLink GPUs only (P2P over PCIe at TP 2 is not known from the catalog).
   b. a second NCCL communicator over the same ranks: vLLM's (pynccl) beside torch's lazily created one, same NCCL,
      same environment, same topology, so kvplan charges it the size the TP > 1 fit gives one communicator
      (``non_torch_tp - non_torch_tp1``): that size is fitted (fitted.py), the count is from the code.
   c. 0.10.0 / 0.10.1 force ``NCCL_CUMEM_ENABLE=0`` (``env_override.py:16-21``) for the whole process, and NCCL
      without cuMem connects every algorithm at init, NVLS buffers included (``init.cc`` ``initTransportsRank``:
      ``runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT``; the other branch calls ``ncclTransportRingConnect``,
      ``ncclTransportTreeConnect``, ``ncclNvlsSetup`` and ``ncclNvlsBufferSetup``). Both communicators are made
      after the snapshot, so item 2 counts twice there. Their tree buffers (also connected eagerly) are not
      counted: their size follows NCCL's channel search, like the ring buffers in the fitted size.

The recommended multicast granularity on Hopper is taken as 512 MiB: inferred, not measured (no GPU here). An
NCCL 2.19.3 log on 8 x H100 (NVIDIA/nccl-tests#216, 4 ranks) binds ``size 1073741824`` for a request of
16 x 2 x (4 MiB + 2 MiB) x 4 = 768 MiB rounded to that granularity (2.19.3 nvls.cc:67-70), so 512 MiB or 1 GiB;
and the vLLM 0.19.0 H100 logs grow by the same ~1.8 GiB over TP 1 at TP 2 and TP 4, which three 512 MiB
granules explain and 2 MiB rounding (0.5 GiB at TP 2, 0.03 GiB at TP 4) does not. Blackwell: assumed the same.
"""

from __future__ import annotations

from kvplan.engines.version import Version
from kvplan.engines.vllm.fitted import INCREASE_SINCE as GROWTH_SINCE  # where the budget charges the growth

MIB = 1 << 20

# GPUs (catalog names, kvplan/data/gpus.yaml) with NVSwitch NVLink multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED
# on HGX boards) -> compute capability. H100 PCIe / H100 NVL (NVLink bridge pairs) and GH200 have no NVSwitch
# multicast; A100 (SM 8.0) none at all.
MULTICAST_GPUS = {"H100-SXM-80GB": 90, "H800-SXM-80GB": 90, "H200-141GB": 90, "H20-96GB": 90, "H20-141GB": 90,
                  "B200-180GB": 100, "GB200": 100,
                  # HGX B300 and GB300 NVL72 are B200's / GB200's NVLink 5 NVSwitch systems with the SM 10.3 die
                  # (FUSION_MAX_SIZE_MB's 103 row is vLLM's own for them); multicast inferred from that design
                  "B300-288GB": 103, "GB300": 103}
# SM 9.0 / 10.x GPUs without NVSwitch multicast: FlashInfer >= 0.6.15 builds the workspace on them too
SM90_100_NO_MULTICAST = {"H100-PCIe-80GB": 90, "H100-NVL-94GB": 90, "GH200-96GB": 90}

MULTICAST_GRANULARITY = 512 * MIB  # recommended multicast granularity, Hopper (inferred: see above)
ALLOC_GRANULARITY = 2 * MIB  # cuMemGetAllocationGranularity, recommended

FUSION_SINCE = (0, 17)  # vLLM 0.17.0 config/vllm.py: fuse_allreduce_rms = enable_allreduce_rms_fusion at O2
UNROUNDED_SINCE = (0, 27)  # vLLM 0.27.0 pins flashinfer-python 0.6.16.post3 (no multicast rounding from 0.6.15)
NVLS_SINCE = (0, 10)  # the growth-since-snapshot bands; all bundle NCCL >= 2.21 (the sizes below)
NCCL_227_SINCE = (0, 10, 2)
# vLLM 0.11.0 gpu_worker.py Worker.init_device: init_worker_distributed_environment moved before the init snapshot
DIST_BEFORE_SNAPSHOT_SINCE = (0, 11)
# vLLM 0.10.2 drops env_override.py's NCCL_CUMEM_ENABLE=0: NCCL connects each algorithm on first use from then on
LAZY_CONNECT_SINCE = (0, 10, 2)
# GPUs whose TP peers are all NVLink-connected on their usual boards (custom all-reduce's is_fully_connected)
NVLINK_GPUS = {*MULTICAST_GPUS, "A100-SXM4-40GB", "A100-SXM4-80GB", "A800-SXM4-80GB"}
CA_MAX_SIZE = 8192 * 1024  # vLLM 0.10.x custom_all_reduce.py CustomAllreduce.__init__ max_size default
CA_WORLD_SIZES = (2, 4, 6, 8)  # CustomAllreduce._SUPPORTED_WORLD_SIZES
CA_META = 4096  # ops.meta_size(), sizeof(Signal): a few KiB (any size under 2 MiB rounds the same)  # torch 2.8 (NCCL 2.27.3): NVLS_NCHANNELS_SM100_NVL 24; 2.26.2 before: 32

# vLLM 0.19.0 compilation/passes/fusion/allreduce_rms_fusion.py:54-71 (MiB; same table in 0.17, 0.18, 0.21, 0.33)
FUSION_MAX_SIZE_MB = {90: {2: 64.0, 4: 2.0, 8: 0.5}, 100: {2: 64.0, 4: 32.0, 8: 1.0}, 103: {2: 64.0, 4: 64.0, 8: 2.0}}
FLAG_COUNT = 256  # flashinfer comm/trtllm_ar.py BarrierFlagCount
SIGNAL_PAD = 2048  # flashinfer comm/mnnvl.py SIGNAL_PAD_SIZE
MAX_COMM = 2147483647 & ~(ALLOC_GRANULARITY - 1)  # flashinfer comm/trtllm_ar.py MAX_COMM_SIZE
NVLS_CHUNK = 128 * 1024  # NCCL NVLS_CHUNKSIZE default
NCCL_STEPS = 8


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def capability(gpu_name: str) -> int | None:
    return MULTICAST_GPUS.get(gpu_name) or SM90_100_NO_MULTICAST.get(gpu_name)


def fusion_workspace(version: Version, tp: int, pp: int, gpu_name: str, hidden: int, max_num_batched_tokens: int,
                     enforce_eager: bool = False, dp: int = 1) -> tuple[int, str]:
    """Bytes per GPU of FlashInfer's all-reduce fusion workspace, and what they are (0 where vLLM builds none)."""
    cap = capability(gpu_name)
    multicast = gpu_name in MULTICAST_GPUS
    rounded = version < UNROUNDED_SINCE
    if (version < FUSION_SINCE or tp not in (2, 4, 8) or pp > 1 or dp > 1 or enforce_eager or cap is None
            or not hidden or (rounded and not multicast)):
        return 0, ""
    max_size = int(FUSION_MAX_SIZE_MB[cap][tp] * MIB)
    tokens = min(max_size // (hidden * 2), max_num_batched_tokens)  # bf16/fp16 activations
    data = tp * tokens * hidden * 2
    sizes = (data, tp * FLAG_COUNT * 4, 3 * min(data, MAX_COMM))
    each = [_round_up(s + SIGNAL_PAD, ALLOC_GRANULARITY) for s in sizes]
    if rounded:
        each = [_round_up(s, MULTICAST_GRANULARITY) for s in each]
    total = sum(each)
    how = (f"{total / MIB:,.0f} MiB computed: FlashInfer all-reduce fusion workspace, 3 buffers for "
           f"{tokens:,} tokens x {hidden:,} x tp {tp}" + (", each rounded up to the 512 MiB multicast granularity"
                                                         if rounded else "")
           + " (vLLM allreduce_rms_fusion.py, flashinfer comm/trtllm_ar.py)")
    return total, how


def nvls_buffers(version: Version, tp: int, gpu_name: str) -> tuple[int, str]:
    """Bytes per GPU of NCCL's NVLS buffers in the growth (0 without NVSwitch multicast or at tp <= 2): one
    communicator's, two where NCCL connects at init and both communicators follow the snapshot (item 3c)."""
    cap = MULTICAST_GPUS.get(gpu_name)
    if cap is None or tp <= 2 or version < NVLS_SINCE:
        return 0, ""
    channels = 16 if cap < 100 else 24 if version >= NCCL_227_SINCE else 32
    one = _round_up(channels * 2 * NVLS_CHUNK * NCCL_STEPS * tp, ALLOC_GRANULARITY)
    comms = 1 + vllm_communicators_after_snapshot(version, tp) if version < LAZY_CONNECT_SINCE else 1
    return comms * one, (f"{comms * one / MIB:,.0f} MiB computed: NCCL NVLS buffers, {channels} channels x 2 x 1 MiB "
                         f"x tp {tp}" + (f" x {comms} communicators" if comms > 1 else "")
                         + " (NCCL src/transport/nvls.cc)")


def vllm_communicators_after_snapshot(version: Version, tp: int) -> int:
    """How many of vLLM's own TP communicators (pynccl) its init snapshot precedes: 1 for 0.10.x at TP > 1, else 0
    (gpu_worker.py ``init_device`` order; see the module's docstring, item 3)."""
    return 1 if tp > 1 and GROWTH_SINCE <= version < DIST_BEFORE_SNAPSHOT_SINCE else 0


def custom_allreduce_buffers(version: Version, tp: int, gpu_name: str) -> tuple[int, str]:
    """Bytes per GPU of vLLM's custom all-reduce IPC buffers counted in the growth (0.10.x only; item 3a)."""
    if not vllm_communicators_after_snapshot(version, tp) or tp not in CA_WORLD_SIZES or gpu_name not in NVLINK_GPUS:
        return 0, ""
    total = _round_up(CA_META + CA_MAX_SIZE, ALLOC_GRANULARITY) + _round_up(CA_MAX_SIZE, ALLOC_GRANULARITY)
    return total, f"{total / MIB:,.0f} MiB computed: vLLM's custom all-reduce IPC buffers (custom_all_reduce.py)"
