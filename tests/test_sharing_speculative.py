"""Speculative decoding in ``estimate`` and ``max-batch`` (vLLM): draft layers in the pool, slots."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.budgets import Settings
from kvplan.errors import UsageError
from kvplan.plan import max_batch
from kvplan.spec import LayerSpec, ModelSpec
from conftest import dense

LLAMA_31_8B = dense("meta-llama/Llama-3.1-8B", 32, 8, 128, max_pos=131072)
# Llama-3.2-1B: 16 layers, 8 KV heads of 64 (config.json: hidden 2048 / 32 heads)
LLAMA_32_1B = dense("meta-llama/Llama-3.2-1B", 16, 8, 64)
DEEPSEEK_V3 = ModelSpec(id="deepseek-ai/DeepSeek-V3", model_type="deepseek_v3", layers=(
    LayerSpec(kind="mla", count=61, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
              v_head_dim=128, num_heads=128),), mtp_layers=1)  # num_nextn_predict_layers 1 in its config.json


def kv(spec=LLAMA_31_8B, context=4096, **kw):
    return kvplan.estimate(spec, contexts=[context], **kw).rows[0]


def test_ngram_holds_k_slots_and_no_cache():
    # scheduler.py: n-gram has no lookahead; a decoding request allocates context + k slots
    r = kv(speculative_method="ngram", num_speculative_tokens=5)
    assert r.kv_bytes == -(-(4096 + 5) // 16) * 16 * 131072
    assert r.context == 4096


def test_draft_model_layers_join_the_pool_with_2k_slots():
    # Scheduler.__init__: lookahead = k for draft models; draft layers cached at the target's block size
    r = kv(speculative_method="draft_model", num_speculative_tokens=5, speculative_model=LLAMA_32_1B)
    per_token = 32 * 4096 + 16 * 2048  # target 128 KiB + draft 8 x (64 + 64) x 2 B x 16 layers
    assert r.kv_bytes == -(-(4096 + 10) // 16) * 16 * per_token


def test_mtp_adds_num_nextn_predict_layers_mla_layers():
    # deepseek_mtp.py: one MTP layer (DeepSeek-V3 num_nextn_predict_layers = 1) caching MLA latents
    # (576 x 2 B); FlashMLA block 64; k = 1 holds 2 slots (verify + lookahead)
    r = kv(DEEPSEEK_V3, speculative_method="mtp", num_speculative_tokens=1)
    assert r.kv_bytes == 62 * 1152 * 4160
    r2 = kv(DEEPSEEK_V3, speculative_method="mtp", num_speculative_tokens=1, num_nextn_predict_layers=2)
    assert r2.kv_bytes == 63 * 1152 * 4160


@pytest.mark.parametrize(("kw", "field"), [
    ({"speculative_method": "eagle", "num_speculative_tokens": 3}, "speculative_model"),
    ({"speculative_method": "medusa", "num_speculative_tokens": 3}, "speculative_method"),
    ({"speculative_method": "ngram"}, "num_speculative_tokens"),
    ({"num_speculative_tokens": 3}, "speculative_method"),
    ({"speculative_method": "ngram", "num_speculative_tokens": 3, "engine": "llamacpp"}, "speculative_method"),
])
def test_speculation_refusals_name_the_field(kw, field):
    with pytest.raises(UsageError) as err:
        kv(**kw)
    assert err.value.field == field


def test_max_batch_with_a_draft_counts_its_blocks_and_weights():
    settings = Settings(weights_bytes=16 * 2**30)
    plain = max_batch(LLAMA_31_8B, gpu_memory="80GiB", max_model_len=8192, context=4096, settings=settings)
    draft = max_batch(LLAMA_31_8B, gpu_memory="80GiB", max_model_len=8192, context=4096, settings=settings,
                      speculative_method="draft_model", num_speculative_tokens=4,
                      speculative_model=LLAMA_32_1B)
    # the draft's layers make every block 1.25x larger: 160 KiB per token-row instead of 128 KiB
    assert draft.num_blocks == draft.per_gpu.kv_cache_bytes // (16 * (32 * 4096 + 16 * 2048))
    assert draft.max_batch == draft.num_blocks // -(-(4096 + 8) // 16)
    assert draft.max_batch < plain.max_batch
    assert any("draft" in a for a in draft.assumptions)


def test_max_batch_refuses_speculation_with_pipeline_parallelism():
    with pytest.raises(UsageError) as err:
        max_batch(LLAMA_31_8B, gpu_memory="80GiB", max_model_len=8192, pp=2, settings=Settings(weights_bytes=2**30),
                  speculative_method="ngram", num_speculative_tokens=2)
    assert err.value.field == "pp"


def test_eagle_proposers_share_one_block_fewer_of_a_prefix_hit():
    # single_type_kv_cache_manager.py FullAttentionManager.find_longest_cache_hit: with use_eagle
    # (eagle, eagle3, mtp) the last matched block is dropped. 4,096-token prefix: 255 blocks shared.
    per_token = 32 * 4096
    r = kvplan.estimate(LLAMA_31_8B, prompt_len=6000, output_len=0, batches=[4], shared_prefix=4096,
                        speculative_method="ngram", num_speculative_tokens=2).rows[0]
    e = kvplan.estimate(LLAMA_31_8B, prompt_len=6000, output_len=0, batches=[4], shared_prefix=4096,
                        speculative_method="eagle", num_speculative_tokens=1,
                        speculative_model=dense("test/eagle-head", 1, 8, 128)).rows[0]
    held = -(-(6000 + 2) // 16) * 16  # k = 1: 1 draft + 1 lookahead; ngram k = 2: 2 drafts
    assert r.kv_bytes == (4096 + 4 * (held - 4096)) * per_token
    eagle_per_token = per_token + 4096  # the head's one layer of 8 x 128 K + V
    assert e.kv_bytes == (4080 + 4 * (held - 4080)) * eagle_per_token


# ---- check: vLLM's speculative flags --------------------------------------------------------------

def _check_script(tmp_path, extra: str):
    from kvplan.deploy import check

    script = tmp_path / "serve.sh"
    script.write_text("vllm serve meta-llama/Llama-3.1-8B --max-model-len 32k --max-num-seqs 512 "
                      f"--gpu-memory-utilization 0.9 {extra}\n")
    report = check([str(script)], gpu="H100-80GB")
    return {f.code: f for f in report.findings}


def test_check_reads_the_speculative_config(tmp_path):
    plain = _check_script(tmp_path, "")["max-num-seqs-unreachable"]
    config = '\'{"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5}\''
    draft = _check_script(tmp_path, f"--speculative-config {config}")["max-num-seqs-unreachable"]
    assert draft.fits < plain.fits  # the draft's layers and weights take KV memory


def test_check_reports_a_bad_speculative_config(tmp_path):
    found = _check_script(tmp_path, "--speculative-config '[1, 2]'")
    assert "invalid-input" in found


def test_read_speculation_infers_the_method_as_vllm_does():
    from kvplan.engines.vllm.flags import read_speculation

    assert read_speculation({}) == {}
    assert read_speculation({"speculative_config": '{"model": "ngram", "num_speculative_tokens": 3}'}) == {
        "speculative_method": "ngram", "num_speculative_tokens": 3, "speculative_model": None}
    eagle = read_speculation({"speculative_config": '{"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", '
                                                    '"num_speculative_tokens": 3}'})
    assert eagle["speculative_method"] == "eagle3"
    mtp = read_speculation({"speculative_config": '{"method": "deepseek_mtp", "num_speculative_tokens": 1}'})
    assert mtp["speculative_method"] == "mtp" and mtp["speculative_model"] is None
    old = read_speculation({"speculative_model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 4})
    assert old == {"speculative_method": "draft_model", "num_speculative_tokens": 4,
                   "speculative_model": "meta-llama/Llama-3.2-1B"}


def test_mtp_k_defaults_to_the_mtp_layer_count():
    # vllm/config/speculative.py: num_speculative_tokens defaults to the MTP model's n_predict
    # (num_nextn_predict_layers): DeepSeek-V3 with no k holds 1 + 1 slots, like k = 1
    r = kv(DEEPSEEK_V3, speculative_method="mtp")
    assert r.kv_bytes == kv(DEEPSEEK_V3, speculative_method="mtp", num_speculative_tokens=1).kv_bytes
    assert any("vLLM's default" in a for a in kvplan.estimate(DEEPSEEK_V3, contexts=[4096],
                                                              speculative_method="mtp").assumptions)


def test_read_speculation_checks_the_draft_tensor_parallel_size():
    """SpeculativeConfig._verify_and_get_draft_tp (vllm 0.33 vllm/config/speculative.py): 1 or the target's
    tp; DraftModelProposer._raise_if_draft_tp_mismatch (vllm/v1/spec_decode/draft_model.py): a draft model
    at the target's tp only; EAGLE builds from the target's parallel config, so 1 is accepted there."""
    from kvplan.engines.vllm.flags import read_speculation

    def config(method: str, model: str, draft_tp: int, tp: int = 4) -> dict:
        return {"tp": tp, "speculative_config": f'{{"method": "{method}", "model": "{model}", '
                                                f'"num_speculative_tokens": 3, "draft_tensor_parallel_size": {draft_tp}}}'}

    assert read_speculation(config("eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 1))["speculative_method"] == "eagle3"
    assert read_speculation(config("draft_model", "meta-llama/Llama-3.2-1B-Instruct", 4))["num_speculative_tokens"] == 3
    with pytest.raises(UsageError, match="1 or the target's tensor_parallel_size"):
        read_speculation(config("eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 2))
    with pytest.raises(UsageError, match="draft-model proposer needs") as err:
        read_speculation(config("draft_model", "meta-llama/Llama-3.2-1B-Instruct", 1))
    assert err.value.field == "speculative_config"
