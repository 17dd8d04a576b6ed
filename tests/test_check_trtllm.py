"""kvplan check reads TensorRT-LLM deployments: ``trtllm-serve`` flags and the ``--extra_llm_api_options`` YAML.

Golden numbers come from TensorRT-LLM's own code (cited in kvplan/engines/trtllm/flags.py and offload.py):
Llama-3.1-8B caches 32 layers x 8 KV heads x 128 x K+V x bf16 = 131,072 B per token on one rank, 65,536 at tp 2;
``calculateMaxNumBlocks`` gives the host pool ``int(host_cache_size / bytes per token) // 32`` blocks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.deploy import check
from kvplan.deploy.flags import Token, find_invocation
from kvplan.engines.trtllm.flags import merge_config, read_serve, read_speculation
from kvplan.errors import KvplanError
from kvplan.render.check_out import render
from conftest import REPO

GIB = 1 << 30
LLAMA8 = "meta-llama/Llama-3.1-8B"
PER_TOKEN = 131_072  # Llama-3.1-8B, one rank, bf16


def _tokens(line: str) -> list[Token]:
    return [Token(w, 1) for w in line.split()]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _one(path: Path):
    report = check([str(path)])
    assert len(report.deployments) == 1, render(report, "table")
    return report, report.deployments[0]


def _find(result, code):
    return [f for f in result.findings if f.code == code]


def _script(tmp_path: Path, flags: str, options: str | None = None, gpu: str = "H100") -> Path:
    if options is not None:
        _write(tmp_path, "extra.yaml", options)
    return _write(tmp_path, "serve.sh", f"# kvplan/gpu: {gpu}\ntrtllm-serve {LLAMA8} {flags}\n")


# ----------------------------------------------------------------------------------------- launchers

@pytest.mark.parametrize("line", [
    f"trtllm-serve {LLAMA8} --tp_size 2",
    f"trtllm-serve serve {LLAMA8} --tp_size 2",
    f"/usr/local/bin/trtllm-serve {LLAMA8} --tensor_parallel_size=2",
    f"python3 -m tensorrt_llm.commands.serve {LLAMA8} --tp_size 2",
    f"python -m tensorrt_llm.commands.serve serve {LLAMA8} --tp_size 2",
    f"exec env HF_HOME=/x trtllm-serve {LLAMA8} --tp_size 2",
    f"trtllm-llmapi-launch trtllm-serve {LLAMA8} --tp_size 2",  # the MPI launch wrapper (tensorrt_llm/llmapi/)
])
def test_trtllm_serve_launchers(line):
    # tensorrt_llm/commands/serve.py: main is a DefaultGroup, `serve` is its default command, MODEL positional
    inv = find_invocation(_tokens(line))
    assert inv is not None and inv.engine == "trtllm"
    assert inv.model is not None and inv.model.value == LLAMA8 and inv.options["tp"].value == "2"


@pytest.mark.parametrize("line", ["trtllm-serve disaggregated -c disagg.yaml", "trtllm-serve grpc m --tp_size 2",
                                  "trtllm-serve mm_embedding_serve m", "trtllm-build --checkpoint_dir x"])
def test_other_trtllm_commands_are_no_server_kvplan_reads(line):
    assert find_invocation(_tokens(line)) is None


def test_flags_are_spelled_with_underscores_as_click_reads_them():
    inv = find_invocation(_tokens(f"trtllm-serve {LLAMA8} --pp_size 2 --max_batch_size 64 --max_num_tokens 4096 "
                                  "--max_seq_len 8192 --kv_cache_free_gpu_memory_fraction 0.7 --kv_cache_dtype fp8 "
                                  "--trust_remote_code --backend pytorch --config x.yaml --tp-size 4"))
    assert inv is not None
    assert {k: o.value for k, o in inv.options.items()} == {
        "pp": "2", "max_num_seqs": "64", "max_num_batched_tokens": "4096", "max_model_len": "8192",
        "free_gpu_memory_fraction": "0.7", "kv_cache_dtype": "fp8", "trust_remote_code": "true",
        "backend": "pytorch", "extra_llm_api_options": "x.yaml"}
    assert "--tp-size" in inv.others  # click has no --tp-size: not read as tp


# ----------------------------------------------------------------------------------------- the YAML

def test_options_file_beside_a_script_is_read(tmp_path):
    path = _script(tmp_path, "--max_seq_len 8192 --extra_llm_api_options extra.yaml",
                   "max_batch_size: 32\nkv_cache_config:\n  free_gpu_memory_fraction: 0.5\n")
    report, result = _one(path)
    assert report.exit_code == 0 and result.engine == "trtllm" and result.max_model_len == 8192
    flag = check([str(_write(tmp_path, "flag.sh", f"# kvplan/gpu: H100\ntrtllm-serve {LLAMA8} --max_seq_len 8192 "
                             "--max_batch_size 32 --kv_cache_free_gpu_memory_fraction 0.5\n"))]).deployments[0]
    assert result.kv_cache_bytes_per_gpu == flag.kv_cache_bytes_per_gpu  # the YAML's 0.5 is the budget's fraction


def test_a_path_kvplan_cannot_see_is_a_not_read_note(tmp_path):
    _, result = _one(_script(tmp_path, "--max_seq_len 8192 --extra_llm_api_options /opt/config/extra.yaml"))
    notes = _find(result, "not-read")
    assert notes and "/opt/config/extra.yaml" in notes[0].message and notes[0].severity == "note"
    assert notes[0].line == 2  # the command's line


def test_malformed_options_file_is_invalid_input(tmp_path):
    report, result = _one(_script(tmp_path, "--extra_llm_api_options extra.yaml", "kv_cache_config: [1, 2\n"))
    assert report.exit_code == 2 and _find(result, "invalid-input")
    report, _ = _one(_script(tmp_path, "--extra_llm_api_options extra.yaml", "- a list\n"))
    assert report.exit_code == 2
    report, _ = _one(_script(tmp_path, "--extra_llm_api_options extra.yaml", "max_seq_len: lots\n"))
    assert report.exit_code == 2


def test_an_options_file_alone_is_skipped_not_an_unknown_format(tmp_path):
    path = _write(tmp_path, "extra.yaml", "max_batch_size: 8\nkv_cache_config: {free_gpu_memory_fraction: 0.8}\n")
    report = check([str(path)])
    assert report.exit_code == 0 and report.files[0].skipped


# ----------------------------------------------------------------------------------------- precedence

def _given(**settings):
    return {"extra_llm_api_options": {"path": "extra.yaml", "data": settings.pop("data"), "error": None}, **settings}


def test_flags_win_from_1_2_and_the_yaml_wins_before():
    # PR #14812 (release 1.2): explicit CLI > YAML > defaults; before, `llm_args | llm_args_dict`: the YAML wins
    given = _given(max_model_len=8192, tp=1, data={"max_seq_len": 4096, "max_batch_size": 16})
    new = merge_config(given, "1.2.0")
    assert {k: v for k, v, _ in new.settings} == {"max_num_seqs": 16}
    old = merge_config(given, "1.0.0")
    assert {k: v for k, v, _ in old.settings} == {"max_model_len": 4096, "max_num_seqs": 16}
    assert [r.code for r in new.remarks] == [r.code for r in old.remarks] == ["config-file"]
    assert "newest rule is assumed" in merge_config(given, None).remarks[0].message  # an unknown version is said


def test_before_1_2_a_kv_cache_config_drops_the_fraction_flag():
    # update_llm_args_with_extra_dict before 1.2: the YAML's kv_cache_config replaces the KvCacheConfig the flags
    # built, so --kv_cache_free_gpu_memory_fraction 0.6 is lost and KvCacheConfig's 0.9 applies
    given = _given(free_gpu_memory_fraction=0.6, data={"kv_cache_config": {"enable_block_reuse": False}})
    old = merge_config(given, "1.1.0")
    assert ("free_gpu_memory_fraction", 0.9) in [(k, v) for k, v, _ in old.settings]
    assert any(r.severity == "warning" for r in old.remarks)
    assert merge_config(given, "1.2.0").settings == ()  # 1.2 merges kv_cache_config key by key


def test_image_tag_picks_the_precedence_rule(tmp_path):
    options = "max_seq_len: 4096\n"
    for tag, want in (("1.0.0", 4096), ("1.2.0", 8192)):
        manifest = _write(tmp_path, f"d{tag}.yaml", _K8S.format(tag=tag, options=options))
        _, result = _one(manifest)
        assert result.engine_version == tag and result.max_model_len == want


_K8S = """apiVersion: v1
kind: ConfigMap
metadata: {{name: opts}}
data:
  extra.yaml: |
    {options}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: llama}}
spec:
  template:
    spec:
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
      containers:
        - name: trt
          image: nvcr.io/nvidia/tensorrt-llm/release:{tag}
          command: [trtllm-serve, meta-llama/Llama-3.1-8B, --max_seq_len, "8192", --config, /cfg/extra.yaml]
          volumeMounts: [{{name: o, mountPath: /cfg}}]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
      volumes: [{{name: o, configMap: {{name: opts}}}}]
"""


def test_configmap_elsewhere_is_not_read(tmp_path):
    text = _K8S.format(tag="1.2.0", options="max_seq_len: 4096").split("---\n", 1)[1]
    _, result = _one(_write(tmp_path, "d.yaml", text))
    assert _find(result, "not-read") and result.max_model_len == 8192


def test_compose_bind_mount_is_read(tmp_path):
    (tmp_path / "cfg").mkdir()
    _write(tmp_path / "cfg", "extra.yaml", "kv_cache_config:\n  max_tokens: 10000\n")
    path = _write(tmp_path, "compose.yaml", f"""services:
  llm:
    image: nvcr.io/nvidia/tensorrt-llm/release:1.2.0
    command: trtllm-serve {LLAMA8} --max_seq_len 4096 --extra_llm_api_options /etc/trt/extra.yaml
    volumes: ["./cfg:/etc/trt:ro"]
    labels: {{kvplan/gpu: H100}}
""")
    _, result = _one(path)
    assert result.kv_cache_tokens == 10_016  # max_tokens 10,000 in whole 32-token blocks (ceilDiv)
    assert _find(result, "kv-token-cap")


# ----------------------------------------------------------------------------------------- what it plans

def test_host_cache_size_is_the_secondary_pool(tmp_path):
    _, result = _one(_script(tmp_path, "--max_seq_len 8192 --config extra.yaml",
                             "kv_cache_config:\n  host_cache_size: 10737418240\n"))
    tier = result.offload
    # 10 GiB / 131,072 B = 81,920 tokens = 2,560 blocks of 32, pinned by BufferManager::pinned: exactly 10 GiB
    assert (tier["blocks"], tier["tokens"], tier["pinned_bytes"]) == (2_560, 81_920, 10 * GIB)
    assert tier["requests"] == 10 and tier["request_bytes_per_gpu"] == 8192 * PER_TOKEN


def test_host_cache_size_is_per_rank(tmp_path):
    _, result = _one(_script(tmp_path, "--tp_size 2 --max_seq_len 8192 --config extra.yaml",
                             "kv_cache_config:\n  host_cache_size: 10737418240\n"))
    # each of the 2 ranks gets the whole host_cache_size: 65,536 B per token per rank -> 5,120 blocks each
    assert result.offload["blocks"] == 5_120 and result.offload["pinned_bytes"] == 20 * GIB


def test_host_cache_rounds_down_to_whole_blocks(tmp_path):
    _, result = _one(_script(tmp_path, "--max_seq_len 4096 --config extra.yaml",
                             "kv_cache_config: {host_cache_size: 1000000000}\n"))
    # int(1e9 / 131,072) = 7,629 tokens -> 238 blocks -> 7,616 tokens pinned
    assert result.offload["blocks"] == 238 and result.offload["pinned_bytes"] == 7_616 * PER_TOKEN


def test_host_cache_against_the_memory_limit(tmp_path):
    text = _K8S.format(tag="1.2.0", options="kv_cache_config: {host_cache_size: 68719476736}")
    text = text.replace("{nvidia.com/gpu: 1}", "{nvidia.com/gpu: 1, memory: 32Gi}")
    report, result = _one(_write(tmp_path, "d.yaml", text))
    assert report.exit_code == 1 and _find(result, "host-memory")


def test_block_reuse_off_plans_a_shared_prefix_without_sharing(tmp_path):
    path = _script(tmp_path, "--max_seq_len 8192 --config extra.yaml", "kv_cache_config: {enable_block_reuse: false}\n")
    _, result = _one(path)
    assert _find(result, "prefix-caching")
    assert read_serve({"extra_llm_api_options": {"path": "x", "data": {}}}, None).sharing  # on by default


def test_speculative_config_is_planned(tmp_path):
    assert read_speculation(_given(data={"speculative_config": {"decoding_type": "MTP",
                                                                "num_nextn_predict_layers": 3}})) == {
        "speculative_method": "mtp", "num_speculative_tokens": 3, "speculative_model": None}
    assert read_speculation(_given(data={"speculative_config": {"decoding_type": "NGram", "max_draft_len": 4}})) == {
        "speculative_method": "ngram", "num_speculative_tokens": 4, "speculative_model": None}
    assert read_speculation(_given(data={"speculative_config": {
        "decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}}
    ))["speculative_model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    with pytest.raises(KvplanError):
        read_speculation(_given(data={"speculative_config": {"decoding_type": "Medusa"}}))
    plain, _ = _one(_script(tmp_path, "--max_seq_len 8192"))
    ngram, _ = _one(_script(tmp_path, "--max_seq_len 8192 --config extra.yaml",
                            "speculative_config: {decoding_type: NGram, max_draft_len: 4}\n"))
    # n-gram: no model, no cache, 4 draft slots per sequence beyond its context (trtllm/speculative.py)
    assert any("n-gram speculation (max_draft_len 4)" in a for a in ngram.deployments[0].assumptions)
    assert not any("n-gram" in a for a in plain.deployments[0].assumptions)


def test_eagle_one_is_refused_by_name(tmp_path):
    report, result = _one(_script(tmp_path, "--max_seq_len 8192 --config extra.yaml",
                                  "speculative_config: {decoding_type: Eagle, max_draft_len: 3, "
                                  "speculative_model_dir: /models/eagle}\n"))
    assert report.exit_code == 2 and "EAGLE-3" in _find(result, "invalid-input")[0].message


def test_the_examples_plan_what_their_yaml_says():
    report = check([str(REPO / "examples" / "pass" / "k8s-trtllm.yaml"),
                    str(REPO / "examples" / "pass" / "compose-trtllm.yaml")])
    k8s, compose = report.deployments
    assert report.exit_code == 0
    assert k8s.offload["pinned_bytes"] == 16 * GIB and k8s.offload["blocks"] == 4_096  # 16 GiB / 131,072 / 32
    assert compose.engine_version == "1.0.0" and compose.kv_dtype == "fp8" and compose.max_model_len == 32_768


@settings(max_examples=40, deadline=None)
@given(size=st.integers(min_value=0, max_value=1 << 40), tp=st.sampled_from([1, 2, 4, 8]))
def test_host_pool_never_pins_more_than_asked(size, tp):
    from kvplan.engines.layout import EngineOptions
    from kvplan.engines.protocol import Demand, KvCapacity
    from kvplan.engines.trtllm.layout import layout
    from kvplan.engines.trtllm.offload import offload_tier
    from kvplan.dtypes import resolve_kv_dtype
    from kvplan.sources.bundled import load_bundled

    spec = load_bundled(LLAMA8)
    lay = layout(spec, resolve_kv_dtype("bfloat16", spec.dtype), (1, 2), EngineOptions(tp=tp))
    cap = KvCapacity(32, None, 1, 1.0, True, 1, 1, 1, 1, True)
    tier = offload_tier([lay], EngineOptions(tp=tp, host_cache_bytes=size), tp, Demand(8192, 8192, 1), cap)
    if size == 0:
        assert tier is None
    else:
        assert tier.pinned_bytes <= size * tp and tier.blocks * 32 == tier.tokens
        assert size * tp - tier.pinned_bytes < 32 * PER_TOKEN  # each rank leaves less than one of its blocks


def test_backend_is_a_click_choice(tmp_path):
    report, result = _one(_script(tmp_path, "--max_seq_len 8192 --backend vllm"))
    assert report.exit_code == 2 and "--backend vllm" in _find(result, "invalid-input")[0].message
    report, result = _one(_script(tmp_path, "--max_seq_len 8192 --backend trt"))
    assert report.exit_code == 0 and _find(result, "backend")  # planned as a prebuilt engine (trtllm/variant.py)
    report, result = _one(_script(tmp_path, "--max_seq_len 8192 --backend _autodeploy"))
    assert report.exit_code == 0 and _find(result, "engine-not-planned")


def test_a_script_without_suffix_is_recognised(tmp_path):
    path = _write(tmp_path, "start", f"# kvplan/gpu: H100\ntrtllm-serve {LLAMA8} --max_seq_len 4096\n")
    report, result = _one(path)
    assert report.files[0].format == "shell" and result.engine == "trtllm" and result.max_model_len == 4096


def test_null_in_the_yaml_is_the_default():
    assert merge_config(_given(data={"max_seq_len": None, "kv_cache_config": {"dtype": None}}), None).settings == ()


def test_the_library_plans_the_host_pool():
    import kvplan

    plan = kvplan.max_batch(LLAMA8, gpu="H100", engine="trtllm", max_model_len=8192,
                            engine_options={"host_cache_bytes": 10 * GIB})
    assert plan.offload["blocks"] == 2_560 and plan.offload["pinned_bytes"] == 10 * GIB
    with pytest.raises(KvplanError):  # another engine has no such option: refused by name
        kvplan.max_batch(LLAMA8, gpu="H100", engine="sglang", engine_options={"host_cache_bytes": GIB})


def test_does_not_fit_says_tensorrt_llm_shrinks_the_window(tmp_path):
    """KVCacheManager.adjust_window_sizes_for_vswa (tensorrt_llm/_torch/pyexecutor/resource_manager.py):
    TensorRT-LLM starts with a shrunk attention window where vLLM would refuse; fail-fast makes it refuse."""
    path = _script(tmp_path, "--max_seq_len 131072 --kv_cache_free_gpu_memory_fraction 0.01", gpu="L4")
    _, result = _one(path)
    [finding] = _find(result, "does-not-fit")
    assert "shrinks the attention window" in finding.message
    strict = _write(tmp_path, "strict.sh", f"# kvplan/gpu: L4\ntrtllm-serve {LLAMA8} --max_seq_len 131072 "
                    "--kv_cache_free_gpu_memory_fraction 0.01 --fail_fast_on_attention_window_too_large\n")
    [finding] = _find(check([str(strict)]).deployments[0], "does-not-fit")
    assert "shrinks" not in finding.message
