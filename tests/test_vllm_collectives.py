"""The TP > 1 collective buffers kvplan computes for vLLM (kvplan/engines/vllm/collectives.py), from FlashInfer's
and NCCL's sizing code: the goldens are those formulas worked by hand."""

from __future__ import annotations

import kvplan
from kvplan.budgets.base import Settings
from kvplan.engines.version import parse_version
from kvplan.engines.vllm import fitted
from kvplan.engines.vllm.budget import non_torch_bytes
from kvplan.engines.vllm.collectives import (custom_allreduce_buffers, fusion_workspace, nvls_buffers,
                                             vllm_communicators_after_snapshot)

MIB = 1 << 20
V = parse_version


def test_fusion_workspace_takes_three_multicast_granules_up_to_flashinfer_0_6_14():
    # vLLM 0.19 (FlashInfer 0.6.6), H100 TP 2, hidden 4096: 8,192 tokens -> buffers 128 MiB, 2 KiB, 384 MiB, each
    # in its own 512 MiB granule; TP 4 / 8 (2 / 0.5 MiB tables) no smaller
    for tp in (2, 4, 8):
        assert fusion_workspace(V("0.19.0"), tp, 1, "H100-SXM-80GB", 4096, 8192)[0] == 1536 * MIB
    size, how = fusion_workspace(V("0.19.0"), 2, 1, "H200-141GB", 8192, 8192)
    assert size == 1536 * MIB and "512 MiB multicast granularity" in how


def test_fusion_workspace_unrounded_from_vllm_0_27():
    # FlashInfer >= 0.6.15: round_up(size + 2 KiB, 2 MiB) only: 130 + 2 + 386 MiB at TP 2, hidden 4096
    assert fusion_workspace(V("0.27.0"), 2, 1, "H100-SXM-80GB", 4096, 8192)[0] == 518 * MIB
    # fewer batched tokens than the table allows: 2,048 tokens -> 32 + 96 MiB of data
    assert fusion_workspace(V("0.27.0"), 2, 1, "H100-SXM-80GB", 4096, 2048)[0] == (34 + 2 + 98) * MIB
    # no NVSwitch multicast needed any more on an SM 9.0 GPU
    assert fusion_workspace(V("0.27.0"), 2, 1, "H100-NVL-94GB", 4096, 8192)[0] == 518 * MIB


def test_no_fusion_workspace_where_vllm_builds_none():
    for args in ((V("0.16.0"), 2, 1, "H100-SXM-80GB"),  # before the O2 default
                 (V("0.19.0"), 3, 1, "H100-SXM-80GB"),  # TP 2 / 4 / 8 only
                 (V("0.19.0"), 2, 2, "H100-SXM-80GB"),  # PP > 1
                 (V("0.19.0"), 2, 1, "A100-SXM4-80GB"),  # SM 8.0
                 (V("0.19.0"), 2, 1, "H100-PCIe-80GB"),  # FlashInfer 0.6.6 needs multicast
                 (V("0.19.0"), 2, 1, "custom (80 GiB)")):
        assert fusion_workspace(*args, 4096, 8192) == (0, "")
    assert fusion_workspace(V("0.19.0"), 2, 1, "H100-SXM-80GB", 4096, 8192, enforce_eager=True)[0] == 0
    assert fusion_workspace(V("0.19.0"), 2, 1, "H100-SXM-80GB", 4096, 8192, dp=2)[0] == 0  # TP x DP: off


def test_budget_charges_the_workspace_by_deployment():
    # kvplan's plan passes DP through to the budget: 2 x TP 2 on H100s takes the workspace off again
    def non_torch(dp: int) -> int:
        plan = kvplan.max_batch(model="meta-llama/Llama-3.1-8B", gpu="H100-SXM-80GB", tp=2, dp=dp,
                                engine_version="0.19.0", max_model_len=8192, settings=Settings())
        return plan.per_gpu.non_torch_bytes

    assert non_torch(1) - non_torch(2) == 1536 * MIB


def test_nvls_buffers_on_nvswitch_gpus_above_two_ranks():
    assert nvls_buffers(V("0.19.0"), 2, "H100-SXM-80GB")[0] == 0  # ncclNvlsInit: off at gpuCount <= 2
    assert nvls_buffers(V("0.19.0"), 4, "H100-SXM-80GB")[0] == 128 * MIB  # 16 channels x 2 x 1 MiB x 4
    assert nvls_buffers(V("0.19.0"), 8, "H200-141GB")[0] == 256 * MIB
    assert nvls_buffers(V("0.19.0"), 8, "B200-180GB")[0] == 384 * MIB  # 24 channels on one SM 10.0 node
    assert nvls_buffers(V("0.10.2"), 8, "B200-180GB")[0] == 384 * MIB  # NCCL 2.27.3 (torch 2.8)
    # NCCL 2.26: 32 channels; before 0.10.2 cuMem is off, NCCL connects NVLS at init in both communicators
    assert nvls_buffers(V("0.10.1"), 8, "B200-180GB")[0] == 2 * 512 * MIB
    assert nvls_buffers(V("0.10.0"), 4, "H200-141GB")[0] == 2 * 128 * MIB
    assert nvls_buffers(V("0.19.0"), 8, "A100-SXM4-80GB")[0] == 0
    assert nvls_buffers(V("0.19.0"), 4, "L40S")[0] == 0


def test_before_0_11_the_snapshot_precedes_vllms_own_communicators():
    # gpu_worker.py Worker.init_device: MemorySnapshot() then init_worker_distributed_environment in 0.10.0-0.10.2,
    # the other way round from 0.11.0; TP 1 has no TP communicator
    for version, count in (("0.10.0", 1), ("0.10.1", 1), ("0.10.2", 1), ("0.11.0", 0), ("0.19.0", 0)):
        assert vllm_communicators_after_snapshot(V(version), 2) == count
    assert vllm_communicators_after_snapshot(V("0.10.2"), 1) == 0
    assert vllm_communicators_after_snapshot(V("0.9.2"), 2) == 0  # 0.8/0.9 charge all non-torch memory anyway


def test_custom_allreduce_buffers_by_hand():
    # 0.10.1.1 custom_all_reduce.py:157-162: cudaMalloc(meta_size + 8 MiB) and cudaMalloc(8 MiB), in 2 MiB pages:
    # 10 + 8 MiB; rank_data (8 MiB) is torch memory made before the profile's baseline, so not charged
    assert custom_allreduce_buffers(V("0.10.2"), 2, "H200-141GB")[0] == 18 * MIB
    assert custom_allreduce_buffers(V("0.10.0"), 8, "H100-SXM-80GB")[0] == 18 * MIB
    assert custom_allreduce_buffers(V("0.10.1"), 4, "A100-SXM4-80GB")[0] == 18 * MIB
    assert custom_allreduce_buffers(V("0.11.0"), 2, "H200-141GB")[0] == 0  # made before the snapshot
    assert custom_allreduce_buffers(V("0.10.2"), 3, "H200-141GB")[0] == 0  # world sizes 2, 4, 6, 8 only
    assert custom_allreduce_buffers(V("0.10.2"), 4, "L40S")[0] == 0  # > 2 GPUs without full NVLink: off


def test_0_10_growth_counts_a_second_communicator():
    # 2 x H200 TP 2 on vLLM 0.10.2 (logged growth 1.38 GiB): torch's communicator and TP 1's growth (the fitted
    # TP > 1 size) + vLLM's own communicator (that size less TP 1's) + 18 MiB custom all-reduce; no NVLS at TP 2
    fit = fitted.FIT
    size, how = non_torch_bytes(V("0.10.2"), 2, 1, "H200-141GB", 2048, 8192)
    assert size == fit.non_torch_tp + (fit.non_torch_tp - fit.non_torch_tp1) + 18 * MIB
    assert "vLLM's own NCCL communicator" in how and "custom all-reduce" in how
    # 0.11: both made before the snapshot
    assert non_torch_bytes(V("0.11.0"), 2, 1, "H200-141GB", 2048, 8192)[0] == fit.non_torch_tp
    # 4 x H200 TP 4 on 0.10.0 (logged 2.04 GiB): + NCCL NVLS 16 x 2 x 1 MiB x 4, in both communicators
    size = non_torch_bytes(V("0.10.0"), 4, 1, "H200-141GB", 4096, 8192)[0]
    assert size == 2 * fit.non_torch_tp - fit.non_torch_tp1 + 18 * MIB + 2 * 128 * MIB
