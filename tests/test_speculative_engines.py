"""Speculative decoding in SGLang and TensorRT-LLM: golden numbers worked from the engines' source.

SGLang (sglang 0.5.14 / 0.5.23 wheels from PyPI, ``python/sglang/srt/``; older rules in 0.5.2 - 0.5.13):
- ``MemoryPoolConfigurator.__init__`` (``model_executor/pool_configurator.py``): for EAGLE / STANDALONE the
  target's bytes per token grow by ``int(cell_size x draft_layers / target_layers)``; the token count is
  ``available_bytes // cell_size`` (``calculate_pool_sizes``), the draft pool gets as many tokens.
- ``spec_decode_alloc_len_per_request`` (``utils/common.py``): ``max(steps x topk, draft_tokens)`` slots.
- ``_auto_choose_speculative_params`` (``arg_groups/speculative_hook.py``): (5, 4, 8) for Llama, else (3, 1, 4).
TensorRT-LLM (``tensorrt_llm/_torch/``): ``get_num_spec_layers`` / ``get_num_extra_kv_tokens``
(``speculative/utils.py``), ``KVCacheManager.prepare_resources`` (``pyexecutor/resource_manager.py``),
``KvCacheCreator._get_kv_size_per_token`` (``pyexecutor/_util.py``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.budgets import Settings
from kvplan.cli import main
from kvplan.errors import UsageError
from kvplan.plan import max_batch
from kvplan.spec import LayerSpec, ModelSpec
from conftest import dense, interleaved

# Llama-3.1-8B: 32 layers, 8 KV heads of 128: 32 x 8 x 256 x 2 B = 131,072 B per token (bf16)
LLAMA_31_8B = dense("meta-llama/Llama-3.1-8B", 32, 8, 128, max_pos=131072)
LLAMA_TOKEN = 32 * 8 * 256 * 2
# an EAGLE-3 head for it: one decoder layer at the target's hidden size (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B)
EAGLE3_HEAD = dense("test/eagle3-llama3.1-8b", 1, 8, 128)
# Llama-3.2-1B: 16 layers, 8 KV heads of 64
LLAMA_32_1B = dense("meta-llama/Llama-3.2-1B", 16, 8, 64)
# DeepSeek-V3: 61 MLA layers caching kv_lora_rank 512 + rope 64 = 576 values, 1,152 B in bf16
DEEPSEEK_V3 = ModelSpec(id="deepseek-ai/DeepSeek-V3", model_type="deepseek_v3", max_position_embeddings=163840,
                        layers=(LayerSpec(kind="mla", count=61, kv_lora_rank=512, qk_rope_head_dim=64,
                                          qk_nope_head_dim=128, v_head_dim=128, num_heads=128),),
                        mtp_layers=1)  # num_nextn_predict_layers 1 in its config.json
MLA_LAYER = 576 * 2
KV_30_GIB = Settings(kv_cache_memory_bytes=30 * 2**30, weights_bytes=16 * 2**30)


def row(spec: ModelSpec = LLAMA_31_8B, context: int = 4096, **kw):
    return kvplan.estimate(spec, contexts=[context], **kw).rows[0]


def plan(engine: str, spec: ModelSpec = LLAMA_31_8B, **kw):
    return max_batch(spec, gpu_memory="80GiB", engine=engine, max_model_len=8192, settings=KV_30_GIB, **kw)


# ---- SGLang -------------------------------------------------------------------------------------

def test_sglang_eagle3_head_grows_the_token_cell_by_its_layers():
    plain = plan("sglang")
    eagle = plan("sglang", speculative_method="eagle3", num_speculative_tokens=3, speculative_model=EAGLE3_HEAD)
    # pool_configurator: 131,072 + int(131,072 x 1 / 32) = 135,168 B per token
    assert plain.kv_cache_tokens == 30 * 2**30 // LLAMA_TOKEN == 245_760
    assert eagle.kv_cache_tokens == 30 * 2**30 // 135_168 == 238_312
    assert any("EAGLE3" in a for a in eagle.assumptions)


def test_sglang_before_0_5_14_sizes_the_draft_apart():
    # 0.5.7 - 0.5.13 (model_runner_kv_cache_mixin.py, ModelRunnerKVCacheMixin.init_memory): the target's
    # count divides by its own 131,072 B; the draft worker gets draft_runner_cache_size = that count
    mid = plan("sglang", engine_version="0.5.13", speculative_method="eagle3", num_speculative_tokens=3,
               speculative_model=EAGLE3_HEAD)
    assert mid.kv_cache_tokens == 30 * 2**30 // LLAMA_TOKEN == 245_760
    # up to 0.5.6 (ModelRunner.init_memory_pool): + max_running_requests (48 by default with speculation)
    # x (steps x topk + draft tokens) + 100 = 48 x (3 + 4) + 100 = 436
    old = plan("sglang", engine_version="0.5.6", speculative_method="eagle3", num_speculative_tokens=3,
               speculative_model=EAGLE3_HEAD)
    assert old.kv_cache_tokens == 245_760 + 436
    assert old.engine_defaults["max_running_requests"] == 48


def test_sglang_before_0_5_14_reserves_more_outside_the_fraction():
    # _handle_gpu_memory_settings (0.5.3 - 0.5.13): H100 80 GiB, tp 1: 512 + 8192 x 1.5 + 256 x 2 + 128 =
    # 13,440 MiB reserved; +2,048 for an EAGLE draft (4,096 from 0.5.10), +6,144 for STANDALONE
    def mfs(version: str, method: str, draft: ModelSpec) -> float:
        p = max_batch(LLAMA_31_8B, gpu_memory="80GiB", engine="sglang", engine_version=version,
                      max_model_len=8192, settings=Settings(weights_bytes=16 * 2**30), speculative_method=method,
                      num_speculative_tokens=3, speculative_model=draft)
        return p.engine_defaults["mem_fraction_static"]

    assert mfs("0.5.9", "eagle3", EAGLE3_HEAD) == round((81920 - 13440 - 2048) / 81920, 3) == 0.811
    assert mfs("0.5.13", "eagle3", EAGLE3_HEAD) == round((81920 - 13440 - 4096) / 81920, 3) == 0.786
    assert mfs("0.5.13", "draft_model", LLAMA_32_1B) == round((81920 - 13440 - 6144) / 81920, 3) == 0.761
    assert mfs("latest", "eagle3", EAGLE3_HEAD) == round((81920 - 13440) / 81920, 3) == 0.836


def test_sglang_slots_are_max_of_steps_times_topk_and_draft_tokens():
    # k = 3 steps, topk 1 -> 4 draft tokens: max(3 x 1, 4) = 4 slots; page size 1
    r = row(engine="sglang", speculative_method="eagle3", num_speculative_tokens=3, speculative_model=EAGLE3_HEAD)
    assert r.kv_bytes == (4096 + 4) * (LLAMA_TOKEN + 4096)


def test_sglang_auto_params_by_architecture():
    from kvplan.engines.sglang.speculative import auto_params, slots_per_request

    assert auto_params(LLAMA_31_8B, "eagle") == (5, 4, 8)
    assert slots_per_request(*auto_params(LLAMA_31_8B, "eagle")) == 20
    assert auto_params(LLAMA_31_8B, "draft_model") == (3, 1, 4)  # STANDALONE: always (3, 1, 4)
    assert auto_params(DEEPSEEK_V3, "mtp") == (3, 1, 4)


def test_sglang_nextn_adds_the_mtp_layer_and_auto_slots():
    # NEXTN on DeepSeek-V3: 1 MTP layer (num_nextn_predict_layers) caching like the target's, SGLang's
    # (3, 1, 4) when no steps are given: 4 slots
    r = row(DEEPSEEK_V3, engine="sglang", speculative_method="mtp")
    assert r.kv_bytes == (4096 + 4) * 62 * MLA_LAYER
    two = row(DEEPSEEK_V3, engine="sglang", speculative_method="mtp", num_speculative_tokens=2,
              num_nextn_predict_layers=2)
    assert two.kv_bytes == (4096 + 3) * 63 * MLA_LAYER


def test_sglang_standalone_counts_the_draft_layers_at_the_targets_size():
    # eagle_draft_num_layers = 16 (Llama-3.2-1B); int(131,072 x 16 / 32) = 65,536: 196,608 B per token,
    # although the draft's own layers cache 8 x 64 heads (its real pool is smaller: said)
    p = plan("sglang", speculative_method="draft_model", num_speculative_tokens=3, speculative_model=LLAMA_32_1B)
    assert p.kv_cache_tokens == 30 * 2**30 // 196_608 == 163_840
    assert any("another shape" in a for a in p.assumptions)


def test_sglang_ngram_has_no_cache_only_slots():
    r = row(engine="sglang", speculative_method="ngram", num_speculative_tokens=5)
    assert r.kv_bytes == (4096 + 5) * LLAMA_TOKEN


@pytest.mark.parametrize("kw, field", [
    ({"spec": interleaved("openai/gpt-oss-20b", "gpt_oss", 24, 2, 128, 8, 64),
      "speculative_method": "mtp"}, "speculative_method"),
    ({"pp": 2, "speculative_method": "ngram", "num_speculative_tokens": 2}, "pp"),
])
def test_sglang_refusals_name_the_field(kw, field):
    spec = kw.pop("spec", LLAMA_31_8B)
    with pytest.raises(UsageError) as err:
        plan("sglang", spec, **kw)
    assert err.value.field == field


def test_sglang_flags_are_read_as_sglang_resolves_them():
    from kvplan.engines.sglang.flags import read_speculation

    assert read_speculation({}) == {}
    assert read_speculation({"speculative_algorithm": "NEXTN"}) == {
        "speculative_method": "mtp", "num_speculative_tokens": None, "speculative_model": None}
    assert read_speculation({"speculative_algorithm": "NGRAM"})["num_speculative_tokens"] == 12
    eagle = read_speculation({"speculative_algorithm": "EAGLE3", "speculative_num_steps": "5",
                              "speculative_draft_model_path": "lmsys/head"})
    assert eagle == {"speculative_method": "eagle3", "num_speculative_tokens": 5, "speculative_model": "lmsys/head"}
    # _handle_eagle_family asserts topk and draft tokens unset when the steps are
    with pytest.raises(UsageError) as err:
        read_speculation({"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 4})
    assert err.value.field == "speculative_num_draft_tokens"
    with pytest.raises(UsageError) as err:
        read_speculation({"speculative_algorithm": "MEDUSA"})
    assert err.value.field == "speculative_algorithm"


def test_check_plans_sglang_speculation(tmp_path):
    from kvplan.deploy import check

    def tokens(extra: str) -> int:
        script = tmp_path / "serve.sh"
        script.write_text(f"python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                          f"--context-length 8192 {extra}\n")
        report = check([str(script)], gpu="H100-80GB")
        return report.deployments[0].kv_cache_tokens

    plain = tokens("")
    draft = tokens("--speculative-algorithm STANDALONE --speculative-num-steps 3 "
                   "--speculative-draft-model-path meta-llama/Llama-3.2-1B-Instruct")
    assert draft < plain


# ---- TensorRT-LLM -------------------------------------------------------------------------------

def test_trtllm_mtp_layers_join_the_manager_with_extra_tokens():
    # get_num_spec_layers: 1 MTP layer; max_draft_len 1: (1 - 1) extra + 1 draft token = 1 slot;
    # 4,097 tokens in blocks of 32: 129 blocks
    r = row(DEEPSEEK_V3, engine="trtllm", speculative_method="mtp")
    assert r.kv_bytes == 129 * 32 * 62 * MLA_LAYER
    # MTP-Eagle: 3 draft tokens from the 1 layer: 2 + 3 = 5 slots: 4,101 tokens, still 129 blocks;
    # a context of 4,124 holds 4,129: 130 blocks
    assert row(DEEPSEEK_V3, engine="trtllm", speculative_method="mtp",
               num_speculative_tokens=3).kv_bytes == 129 * 32 * 62 * MLA_LAYER
    assert row(DEEPSEEK_V3, 4124, engine="trtllm", speculative_method="mtp",
               num_speculative_tokens=3).kv_bytes == 130 * 32 * 62 * MLA_LAYER


def test_trtllm_eagle3_one_model_and_draft_target_two_model():
    # one-model: 33 layers in one manager, k = 3: 2 + 3 = 5 slots -> ceil(4,101 / 32) = 129 blocks
    one = row(engine="trtllm", speculative_method="eagle3", num_speculative_tokens=3, speculative_model=EAGLE3_HEAD)
    assert one.kv_bytes == 129 * 32 * 33 * 8 * 256 * 2
    # two-model draft-target: the draft's own 16 layers of 8 x 64 heads, k = 4 slots, same token count
    two = row(engine="trtllm", speculative_method="draft_model", num_speculative_tokens=4,
              speculative_model=LLAMA_32_1B)
    assert two.kv_bytes == 129 * 32 * (LLAMA_TOKEN + 16 * 8 * 128 * 2)
    ngram = row(engine="trtllm", speculative_method="ngram", num_speculative_tokens=4)
    assert ngram.kv_bytes == 129 * 32 * LLAMA_TOKEN


def test_trtllm_max_batch_with_mtp_counts_the_layer():
    p = plan("trtllm", DEEPSEEK_V3, speculative_method="mtp")
    assert p.kv_cache_tokens == 30 * 2**30 // (32 * 62 * MLA_LAYER) * 32 == 450_976


def test_trtllm_refuses_eagle_heads_by_name(capsys):
    code = main(["max-batch", "meta-llama/Llama-3.1-8B", "--gpu", "H100-80GB", "--engine", "trtllm",
                 "--speculative-method", "eagle", "--speculative-model", "meta-llama/Llama-3.2-1B-Instruct",
                 "--num-speculative-tokens", "3"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--speculative-method" in err and "EAGLE-3" in err


def test_speculation_never_costs_less_than_none():
    for engine in ("sglang", "trtllm"):
        plain = row(engine=engine).kv_bytes
        for kw in ({"speculative_method": "ngram", "num_speculative_tokens": 1},
                   {"speculative_method": "eagle3", "num_speculative_tokens": 1, "speculative_model": EAGLE3_HEAD}):
            assert row(engine=engine, **kw).kv_bytes >= plain


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 16), context=st.integers(1, 32768), engine=st.sampled_from(["sglang", "trtllm"]))
def test_more_draft_tokens_never_hold_less(k, context, engine):
    # invariant: a deeper draft holds at least as many slots per sequence, never fewer bytes
    kw = {"engine": engine, "speculative_method": "eagle3", "speculative_model": EAGLE3_HEAD}
    fewer = row(context=context, num_speculative_tokens=k, **kw).kv_bytes
    assert row(context=context, num_speculative_tokens=k + 1, **kw).kv_bytes >= fewer >= row(
        context=context, engine=engine).kv_bytes
