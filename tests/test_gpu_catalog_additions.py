"""GPUs added to the catalog (kvplan/data/gpus.yaml) after the first releases: B300, GB300, GB10, RTX PRO 6000,
RTX 5080 / 5070 Ti / 5060 Ti 16GB, RTX 4090 D, L20, MI355X. Each resolves by its names as people and engines
write them, and holds the memory its cited reading printed."""

from __future__ import annotations

import pytest

from benchmarks.accuracy import read_yaml
from benchmarks.crossval import DATA
from kvplan.errors import UsageError
from kvplan.hardware import find_gpu, load_catalog

GIB = 1 << 30
MIB = 1 << 20


@pytest.mark.parametrize("name, canonical", [
    ("B300", "B300-288GB"),
    ("NVIDIA B300 SXM6 AC", "B300-288GB"),      # torch / nvidia-smi device name
    ("NVIDIA_B300_SXM6_AC", "B300-288GB"),      # as vLLM's fused-MoE config files spell it
    ("NVIDIA B300", "B300-288GB"),
    ("GB300", "GB300"),
    ("NVIDIA GB300", "GB300"),
    ("GB10", "GB10"),
    ("NVIDIA GB10", "GB10"),
    ("DGX Spark", "GB10"),
    ("RTX PRO 6000", "RTX-PRO-6000-Server"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-Server"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX-PRO-6000-WS"),
    ("RTX 5080", "RTX-5080"),
    ("NVIDIA GeForce RTX 5080", "RTX-5080"),
    ("NVIDIA GeForce RTX 5070 Ti", "RTX-5070-Ti"),
    ("RTX 5060 Ti 16GB", "RTX-5060-Ti-16GB"),
    ("L20", "L20"),
    ("NVIDIA L20", "L20"),
    ("NVIDIA GeForce RTX 4090 D", "RTX-4090D"),
    ("NVIDIA GeForce RTX 4070 SUPER", "RTX-4070-SUPER"),
    ("AMD Instinct MI355X", "MI355X"),
    ("NVIDIA H20-3e", "H20-141GB"),
])
def test_new_gpus_resolve_by_their_names(name: str, canonical: str) -> None:
    assert find_gpu(name, load_catalog()).name == canonical


@pytest.mark.parametrize("label, canonical", [
    ("NVIDIA-B300-SXM6-AC", "B300-288GB"), ("NVIDIA-GB300", "GB300"), ("NVIDIA-GB10", "GB10"),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-Server"), ("NVIDIA-L20", "L20"),
])
def test_gpu_feature_discovery_labels_find_the_new_gpus(label: str, canonical: str) -> None:
    from kvplan.deploy.gpus import gpu_for_label

    assert gpu_for_label(label, load_catalog()).name == canonical


@pytest.mark.parametrize("name, memory, precision, estimate, printed", [
    ("B300", 274113 * MIB, "mib", False, "274113 MiB"),              # cudaGetDeviceProperties totalGlobalMem
    ("GB300", int(276.5 * GIB), "gib", False, "276.50 GiB"),          # torch OOM "total capacity of 276.50 GiB"
    ("GB10", 122570 * MIB, "mib", False, "122,570 MBytes"),          # deviceQuery on a DGX Spark
    ("RTX PRO 6000", 97250 * MIB, "mib", False, "total_memory=97250MB"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 97250 * MIB, "mib", True, "97887 MiB"),
    ("RTX 5080", int(15.47 * GIB), "gib", False, "15.47 GiB"),
    ("RTX 5070 Ti", int(15.47 * GIB), "gib", False, "15.47 GiB"),
    ("RTX 5060 Ti 16GB", int(15.48 * GIB), "gib", False, "15.48 GiB"),
    ("RTX 4090 D", int(23.55 * GIB), "gib", False, "23.55GiB"),
    ("RTX 4070 SUPER", int(11.99 * GIB), "gib", False, "11.99 GiB"),
    ("L20", 47_576_711_168, "exact", True, "46068 MiB"),             # the L40S reading; nvidia-smi's total cited
    ("MI355X", 309_220_868_096, "exact", False, "309220868096"),     # rocm-smi VRAM Total Memory (B)
])
def test_new_gpus_hold_the_memory_their_source_printed(name: str, memory: int, precision: str, estimate: bool,
                                                       printed: str) -> None:
    g = find_gpu(name, load_catalog())
    assert (g.memory_bytes, g.memory_precision, g.estimate) == (memory, precision, estimate)
    assert printed in g.sources["memory"]  # the figure is the one the cited reading printed
    assert ("ESTIMATE" in g.sources["memory"]) == estimate


def test_estimates_are_the_sibling_readings_they_name() -> None:
    catalog = load_catalog()
    assert find_gpu("L20", catalog).memory_bytes == find_gpu("L40S", catalog).memory_bytes
    assert find_gpu("RTX-PRO-6000-WS", catalog).memory_bytes == find_gpu("RTX-PRO-6000-Server", catalog).memory_bytes


def test_the_bare_5060_ti_name_is_refused_not_guessed() -> None:
    # an 8 GB RTX 5060 Ti prints the same device name: the 16 GB entry is named with its size only
    with pytest.raises(UsageError, match=r"unknown GPU 'RTX 5060 Ti' \(did you mean RTX-5060-Ti-16GB"):
        find_gpu("RTX 5060 Ti", load_catalog())


def _case(file: str, case_id: str) -> dict:
    return next(c for c in read_yaml(DATA / file)["cases"] if c["id"] == case_id)


@pytest.mark.parametrize("name, file, case_id", [
    ("B300", "engine_logs_issue21d.yaml", "file-b300-gemma-4-31b-it-u092-16k-v0260"),            # vLLM 0.26
    ("GB10", "engine_logs_issue21g.yaml", "trtllm-dgxspark-gptoss120b-111rc3-pytorch"),          # TensorRT-LLM
    ("RTX 4090 D", "engine_logs_collected.yaml", "file-art-qwen25-05b-bnb4-4090d-u017-32k"),     # vLLM 0.8.5
])
def test_catalog_memory_matches_the_total_the_kept_logs_print(name: str, file: str, case_id: str) -> None:
    total = _case(file, case_id)["reported"]["total_gpu_memory_gib"]
    assert round(find_gpu(name, load_catalog()).memory_bytes / GIB, 2) == total


def test_the_logs_naming_a_new_gpu_get_past_the_gpu() -> None:
    import benchmarks.crossval_engines as cv

    b300 = _case("engine_logs_issue21f.yaml", "trtllm-13rc7-kimi-k25-nvfp4-8xb300-tp8-fp8kv")
    spark = _case("engine_logs_issue21g.yaml", "trtllm-dgxspark-gptoss120b-111rc3-pytorch")
    assert cv._gpu(b300).name == "B300-288GB"
    assert cv._gpu(spark).name == "GB10"
    # the B300 report logs no weights of its NVFP4 checkpoint; the Spark's memory is the host's too
    assert cv.inputs(b300) == (None, "quantized checkpoint and its weights not logged")
    assert cv.inputs(spark)[1].startswith("GPU shared (DGX Spark unified memory")
    for case_id in ("trtllm-lm7-smollm2-135m-rtx4070super-121-f090", "trtllm-lm7-smollm2-135m-rtx4070super-121-f025"):
        case = _case("engine_logs_issue21i.yaml", case_id)
        assert cv._gpu(case).name == "RTX-4070-SUPER"
        assert cv.inputs(case)[1] != "GPU not known"


def test_vllm_sampler_sm_counts_name_catalog_gpus_and_cover_the_added_ones() -> None:
    from kvplan.engines.vllm.sampler import SM_COUNTS

    names = {g.name for g in load_catalog()}
    assert set(SM_COUNTS) <= names
    # where a device printed its SM count (the catalog entry's memory_source names the file)
    assert (SM_COUNTS["B300-288GB"], SM_COUNTS["RTX-PRO-6000-Server"], SM_COUNTS["GB10"], SM_COUNTS["RTX-5080"]) \
        == (148, 188, 48, 84)


@pytest.mark.parametrize("device, canonical", [
    ("NVIDIA_B300_SXM6_AC", "B300-288GB"), ("NVIDIA_GB10", "GB10"), ("NVIDIA_GB300", "GB300"),
    ("NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition", "RTX-PRO-6000-Server"),
])
def test_the_gpu_a_vllm_log_names_is_in_the_catalog(device: str, canonical: str) -> None:
    from kvplan.logs.parse import parse_text

    text = ("INFO 08-06 20:10:11 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: "
            "model='Qwen/Qwen3-30B-A3B', tensor_parallel_size=1\n"
            "INFO 08-06 20:12:01 [fused_moe.py:720] Using configuration from "
            f"/x/E=128,N=768,device_name={device}.json for MoE layer.\n")
    log = parse_text(text, engine="vllm")
    assert find_gpu(str(log.settings.gpu_name), load_catalog()).name == canonical


def test_b300_plans_at_tp_8_hold_the_nvswitch_buffers_b200_does() -> None:
    """HGX B300 / GB300 are B200's NVSwitch systems: vLLM computes its FlashInfer all-reduce workspace there (SM 10.3
    row of its own table) and SGLang charges the NVSwitch start-up size, as on B200; a PCIe card charges neither."""
    from kvplan import max_batch
    from kvplan.engines.sglang.fitted import NVSWITCH_GPUS
    from kvplan.engines.vllm.collectives import MULTICAST_GPUS

    assert MULTICAST_GPUS["B300-288GB"] == MULTICAST_GPUS["GB300"] == 103
    assert all(any(key in name for key in NVSWITCH_GPUS) for name in ("B300-288GB", "GB300", "B200-180GB"))

    def non_torch(engine: str, gpu: str) -> int:
        plan = max_batch("meta-llama/Llama-3.1-70B", gpu=gpu, tp=8, engine=engine)
        return next(item.bytes for item in plan.items if item.name == "non_torch")

    assert non_torch("vllm", "B300") > non_torch("vllm", "RTX-PRO-6000-Server")
    assert non_torch("sglang", "B300") == non_torch("sglang", "B200") > non_torch("sglang", "RTX-PRO-6000-Server")
