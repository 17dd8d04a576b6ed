"""transformers (engine hf) speculative decoding: assisted generation, prompt lookup and MTP.

Golden numbers from transformers 5.23's own code (``src/transformers/generation/utils.py``
``_assisted_decoding``; ``generation/candidate_generator.py`` ``AssistedCandidateGenerator``,
``PromptLookupCandidateGenerator``, ``MTPCandidateGenerator``; ``cache_utils.py`` ``MtpCache``), and an
oracle that runs ``generate`` with two tiny random models on the CPU and weighs both caches at every
verify pass of the target (skipped where transformers is not installed).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.budgets import Settings
from kvplan.errors import KvplanError, UsageError
from kvplan.plan import max_batch
from kvplan.spec import LayerSpec, ModelSpec
from conftest import dense

LLAMA_31_8B = dense("meta-llama/Llama-3.1-8B", 32, 8, 128, max_pos=131072)  # 131,072 B per token in bf16
LLAMA_32_1B = dense("meta-llama/Llama-3.2-1B", 16, 8, 64)  # 32,768 B per token in bf16
DEEPSEEK_V3 = ModelSpec(id="deepseek-ai/DeepSeek-V3", model_type="deepseek_v3", layers=(
    LayerSpec(kind="mla", count=61, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
              v_head_dim=128, num_heads=128),), mtp_layers=1)  # 5.23 caches the latent: (512 + 64) x 2 B per token
GEMMA_LIKE = ModelSpec(id="sliding", model_type="gemma3_text", layers=(
    LayerSpec(kind="sliding", count=5, kv_heads=8, head_dim=128, window=1024),
    LayerSpec(kind="full", count=1, kv_heads=8, head_dim=128)))


def row(spec=LLAMA_31_8B, context=4096, engine="hf", **kw):
    return kvplan.estimate(spec, contexts=[context], engine=engine, **kw).rows[0]


# --- golden numbers -----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 5, 20, 64])
def test_draft_model_holds_the_target_at_context_and_the_draft_one_behind(k):
    # _calculate_new_tokens caps candidates at max_length - length - 1: at the last verify pass the target
    # holds max_length - 1 tokens (plain generation's context), the assistant max_length - 2, whatever k is
    r = row(speculative_model=LLAMA_32_1B, num_speculative_tokens=k, context=8192)
    assert r.kv_bytes == 131072 * 8192 + 32768 * 8191 == 1_342_144_512
    assert r.context == 8192


@pytest.mark.parametrize("k", [1, 2, 10])
def test_prompt_lookup_holds_k_minus_one_beyond_the_context_and_no_draft(k):
    # PromptLookupCandidateGenerator: up to prompt_lookup_num_tokens candidates even at max_length - 2
    assert row(speculative_method="ngram", num_speculative_tokens=k).kv_bytes == 131072 * (4096 + k - 1)


@pytest.mark.parametrize("layers", [1, 2])
def test_mtp_layers_cache_like_the_last_layer_one_behind_while_the_target_runs_ahead(layers):
    # MTPCandidateGenerator: one uncapped candidate per MTP layer; MtpCache layers hold max_length - 2
    r = row(DEEPSEEK_V3, speculative_method="mtp", num_nextn_predict_layers=layers)
    assert r.kv_bytes == 61 * 1152 * (4096 + layers) + layers * 1152 * 4095
    assert row(DEEPSEEK_V3, speculative_method="mtp").kv_bytes == 61 * 1152 * 4097 + 1152 * 4095


def test_the_explanation_shows_the_draft_rule():
    result = kvplan.estimate(LLAMA_31_8B, contexts=[1000], engine="hf", speculative_model=LLAMA_32_1B,
                             num_speculative_tokens=4)
    held = {f.layers: f.tokens_held_formula for f in result.formulas}
    assert held == {"0-31": "context", "32-47": "context - 1"}
    assert any("_calculate_new_tokens" in a for a in result.assumptions)


def test_the_draft_weights_join_the_budget_and_max_batch_is_one():
    from dataclasses import replace

    draft = dense("draft", 16, 8, 64)
    draft = replace(draft, weights_bytes=2 * 2**30)
    target = replace(LLAMA_31_8B, weights_bytes=16 * 2**30)
    plain = max_batch(target, gpu_memory="80GiB", max_model_len=8192, context=4096, engine="hf")
    spec = max_batch(target, gpu_memory="80GiB", max_model_len=8192, context=4096, engine="hf",
                     speculative_model=draft, num_speculative_tokens=5)
    assert plain.max_batch > 1 and spec.max_batch == 1
    assert spec.per_gpu.weights_bytes == plain.per_gpu.weights_bytes + 2 * 2**30
    assert any("largest batch is 1" in a for a in spec.assumptions)


@pytest.mark.parametrize(("kw", "field"), [
    ({"batches": [2]}, "batches"),
    ({"batches": [1], "n": 2}, "batches"),
    ({"engine": "hf-static"}, "speculative_method"),
    ({"speculative_model": None, "speculative_method": "eagle"}, "speculative_model"),
    ({"engine_options": {"kv_cache": "quantized", "backend": "quanto"}}, "speculative_method"),
    ({"engine_options": {"evict": (("sink", 4), ("window", 100))}}, "speculative_method"),
])
def test_refusals_name_the_field(kw, field):
    args = {"speculative_model": LLAMA_32_1B, "num_speculative_tokens": 3, **kw}
    with pytest.raises(UsageError) as err:
        row(**args)
    assert err.value.field == field


def test_refusals_say_why():
    with pytest.raises(UsageError, match="batch_size = 1") as err:
        row(speculative_method="ngram", num_speculative_tokens=3, batches=[1, 4])
    assert "5.23" in str(err.value)
    with pytest.raises(UsageError, match="no eagle3 proposer"):
        row(speculative_method="eagle3", speculative_model=LLAMA_32_1B, num_speculative_tokens=3)
    with pytest.raises(UsageError, match="sliding") as err:
        row(GEMMA_LIKE, speculative_method="ngram", num_speculative_tokens=3)
    assert err.value.field == "speculative_method"
    with pytest.raises(UsageError, match="sliding"):
        row(speculative_model=GEMMA_LIKE, num_speculative_tokens=3)
    with pytest.raises(UsageError, match="one token per MTP layer") as err:
        row(DEEPSEEK_V3, speculative_method="mtp", num_speculative_tokens=2)
    assert err.value.field == "num_speculative_tokens"
    with pytest.raises(UsageError) as err:
        max_batch(LLAMA_31_8B, gpu_memory="80GiB", max_model_len=8192, engine="hf", batch=2, solve="context",
                  settings=Settings(weights_bytes=2**30), speculative_method="ngram", num_speculative_tokens=2)
    assert err.value.field == "batch"
    with pytest.raises(UsageError) as err:
        max_batch(LLAMA_31_8B, gpu_memory="80GiB", max_model_len=8192, engine="hf", pp=2,
                  settings=Settings(weights_bytes=2**30), speculative_method="ngram", num_speculative_tokens=2)
    assert err.value.field == "pp"


def test_cli_estimate_reports_it(capsys):
    from kvplan.cli import main

    code = main(["estimate", "meta-llama/Llama-3.1-8B", "--engine", "hf", "-c", "8k", "--speculative-model",
                 "meta-llama/Llama-3.2-1B-Instruct", "--num-speculative-tokens", "5", "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["rows"][0]["kv_bytes"] == 131072 * 8192 + 32768 * 8191
    code = main(["estimate", "meta-llama/Llama-3.1-8B", "--engine", "hf", "-c", "8k", "-b", "4",
                 "--speculative-method", "ngram", "--num-speculative-tokens", "5"])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "--batch" in err and "batch_size = 1" in err


@settings(max_examples=40, deadline=None)
@given(context=st.integers(2, 1 << 20), k=st.integers(1, 64), layers=st.integers(1, 4),
       draft_layers=st.integers(1, 40), heads=st.sampled_from([1, 2, 8]), head_dim=st.sampled_from([64, 128]))
def test_invariant_the_peak_is_the_plain_target_plus_the_draft_one_token_behind(context, k, layers, draft_layers,
                                                                                heads, head_dim):
    target, draft = dense("t", layers, heads, head_dim), dense("d", draft_layers, 1, 64)
    plain = row(target, context).kv_bytes
    assisted = row(target, context, speculative_model=draft, num_speculative_tokens=k).kv_bytes
    assert assisted == plain + row(draft, context - 1).kv_bytes
    lookup = row(target, context, speculative_method="ngram", num_speculative_tokens=k).kv_bytes
    assert lookup == row(target, context + k - 1).kv_bytes >= plain


# --- verify allocates the draft's cache too -------------------------------------------------------


@pytest.mark.parametrize("kw", [
    {"speculative_model": LLAMA_32_1B, "num_speculative_tokens": 4},
    {"speculative_method": "ngram", "num_speculative_tokens": 3},
    {"speculative_method": "mtp"},
])
def test_verify_on_cpu_measures_what_estimate_predicts(kw):
    pytest.importorskip("torch")
    from kvplan.verify import verify

    small = dense("small", 2, 2, 16)
    model = DEEPSEEK_SMALL if kw.get("speculative_method") == "mtp" else small
    draft = {"speculative_model": dense("draft", 1, 1, 8)} if "speculative_model" in kw else {}
    args = {**kw, **draft}
    r = verify(model, engine="hf", device="cpu", batch=1, context=300, **args)
    est = kvplan.estimate(model, contexts=[300], engine="hf", **args).rows[0]
    assert r.exact and r.predicted_bytes == est.kv_bytes
    with pytest.raises(KvplanError) as err:
        verify(model, engine="hf", device="cpu", batch=2, context=300, **args)
    assert err.value.field in ("batch", "batches")


DEEPSEEK_SMALL = ModelSpec(id="deepseek-small", model_type="deepseek_v3", layers=(
    LayerSpec(kind="mla", count=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
              num_heads=4),), mtp_layers=1)


# --- oracle: transformers' own generate, both caches weighed at every verify pass ---------------------


def _tiny_llama(tmp_path, name, layers, hidden, kv_heads, seed):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden,
                                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=kv_heads,
                                      max_position_embeddings=512, bos_token_id=0, eos_token_id=None,
                                      pad_token_id=0)
    model = transformers.LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None  # run to max_length: the peak is at the last steps
    config.save_pretrained(tmp_path / name)  # kvplan reads the same config.json
    return model, kvplan.load_model(str(tmp_path / name / "config.json"))


def _cache_of(kwargs: dict):
    """The cache a forward pass was given: ``past_key_values`` until transformers 5.2x, ``cache`` since."""
    found = kwargs.get("past_key_values")
    return found if found is not None else kwargs.get("cache")


def _cache_bytes(cache) -> int:
    if cache is None:
        return 0
    return sum(t.numel() * t.element_size() for layer in cache.layers if layer.is_initialized
               for t in (layer.keys, layer.values))


def _peak(target, generate, draft=None, other=lambda: None) -> tuple[int, int]:
    """The largest target + draft cache bytes seen just after a forward pass of the target (its verify
    pass, before ``crop``), and the target's share then."""
    seen: dict[str, object] = {}
    peaks: list[tuple[int, int]] = []

    def on_draft(module, args, kwargs, out):
        seen["draft"] = _cache_of(kwargs)

    def on_target(module, args, kwargs, out):
        mine = _cache_bytes(_cache_of(kwargs))
        theirs = _cache_bytes(seen.get("draft") or other())
        peaks.append((mine + theirs, mine))

    hooks = [target.register_forward_hook(on_target, with_kwargs=True)]
    if draft is not None:
        hooks.append(draft.register_forward_hook(on_draft, with_kwargs=True))
    try:
        generate()
    finally:
        for hook in hooks:
            hook.remove()
    return max(peaks)


@pytest.mark.slow
@pytest.mark.parametrize(("k", "schedule", "same"), [(4, "constant", False), (20, "constant", False),
                                                     (3, "heuristic", True), (5, "constant", True)])
def test_oracle_assisted_generation_peak(tmp_path, k, schedule, same):
    torch = pytest.importorskip("torch")
    target, target_spec = _tiny_llama(tmp_path, "target", 3, 64, 2, 1)
    # same: the draft is the target's twin, so every candidate is accepted (the heuristic grows k by 2)
    draft, draft_spec = _tiny_llama(tmp_path, "draft", 3, 64, 2, 1) if same else \
        _tiny_llama(tmp_path, "draft", 2, 32, 1, 2)
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = schedule
    draft.generation_config.assistant_confidence_threshold = 0.0  # never stop drafting early
    prompt, new = 10, 30
    ids = torch.randint(1, 64, (1, prompt), generator=torch.Generator().manual_seed(3))
    total, mine = _peak(target, lambda: target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                                        assistant_model=draft, do_sample=False), draft)
    context = prompt + new - 1  # plain generation's last cache: what kvplan's hf context is
    est = kvplan.estimate(target_spec, contexts=[context], engine="hf", kv_dtypes="float32",
                          speculative_model=draft_spec, num_speculative_tokens=k).rows[0]
    plain = kvplan.estimate(target_spec, contexts=[context], engine="hf", kv_dtypes="float32").rows[0]
    assert mine == plain.kv_bytes
    assert total == est.kv_bytes


@pytest.mark.slow
@pytest.mark.parametrize(("k", "steps"), [(1, 9), (2, 6), (5, 4)])
def test_oracle_prompt_lookup_peak(tmp_path, k, steps):
    torch = pytest.importorskip("torch")
    target, spec = _tiny_llama(tmp_path, "target", 2, 64, 2, 1)
    target.lm_head.weight.data.zero_()  # all logits equal: greedy decoding always picks token 0
    # a prompt of zeros after one other token: every lookup finds k zeros to propose, all accepted, so each
    # step adds k + 1 tokens and the last one starts at max_length - 2, where the bound is reached
    prompt = 12
    ids = torch.tensor([[5] + [0] * (prompt - 1)])
    new = steps * (k + 1) + 2
    total, _ = _peak(target, lambda: target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                                     prompt_lookup_num_tokens=k, do_sample=False))
    context = prompt + new - 1
    est = kvplan.estimate(spec, contexts=[context], engine="hf", kv_dtypes="float32",
                          speculative_method="ngram", num_speculative_tokens=k).rows[0]
    assert total == est.kv_bytes


@pytest.mark.slow
@pytest.mark.parametrize("layers", [1, 3])
def test_oracle_mtp_peak(tmp_path, monkeypatch, layers):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    modeling_layers = pytest.importorskip("transformers.modeling_layers")
    if not hasattr(modeling_layers, "MtpModel"):
        pytest.skip("this transformers has no MTP generation (generate(use_mtp=True))")
    torch.manual_seed(1)
    config = transformers.DeepseekV3Config(
        vocab_size=64, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
        topk_group=1, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8,
        qk_nope_head_dim=8, v_head_dim=8, max_position_embeddings=512, bos_token_id=0, eos_token_id=None,
        pad_token_id=0, num_mtp_layers=layers)
    model = transformers.DeepseekV3ForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    # MtpModel.from_pretrained reads the MTP weights from the checkpoint on disk; random ones do here
    monkeypatch.setattr(modeling_layers.MtpModel, "from_pretrained",
                        classmethod(lambda cls, main, device_map=None, **kw: cls(main, layers).eval()))
    generators: list = []
    generator_class = transformers.generation.candidate_generator.MTPCandidateGenerator
    init = generator_class.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **kwargs)
        generators.append(self)

    monkeypatch.setattr(generator_class, "__init__", keep)
    ids = torch.randint(1, 64, (1, 10), generator=torch.Generator().manual_seed(2))
    total, mine = _peak(model, lambda: model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                                      use_mtp=True, do_sample=False),
                        other=lambda: generators[0].mtp_cache if generators else None)
    config.save_pretrained(tmp_path / "mtp")
    spec = kvplan.load_model(str(tmp_path / "mtp" / "config.json"))
    context = 10 + 8 - 1
    est = kvplan.estimate(spec, contexts=[context], engine="hf", kv_dtypes="float32", speculative_method="mtp",
                          num_nextn_predict_layers=layers).rows[0]
    assert total == est.kv_bytes


def test_assisted_generation_without_k_takes_transformers_default_and_says_so():
    # issue 21: transformers has a default (GenerationConfig num_assistant_tokens 20): taken, and said, not refused
    from kvplan.engines.hf.speculative import DEFAULT_ASSISTANT_TOKENS

    spec = kvplan.load_model("meta-llama/Llama-3.1-8B")
    without = kvplan.estimate(spec, contexts=[8192], engine="hf", speculative_model="meta-llama/Llama-3.2-1B-Instruct")
    given = kvplan.estimate(spec, contexts=[8192], engine="hf", speculative_model="meta-llama/Llama-3.2-1B-Instruct",
                            num_speculative_tokens=DEFAULT_ASSISTANT_TOKENS)
    assert without.rows[0].kv_bytes == given.rows[0].kv_bytes
    assert any("num_assistant_tokens not given" in a and "20" in a for a in without.assumptions)


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_engines_without_a_default_refuse_a_missing_k_by_field(engine):
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError) as caught:
        kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100", engine=engine,
                         speculative_model="meta-llama/Llama-3.2-1B-Instruct")
    assert caught.value.field == "num_speculative_tokens"


def test_sglang_without_k_takes_its_own_choice():
    plan = kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100", engine="sglang",
                            speculative_model="meta-llama/Llama-3.2-1B-Instruct")
    assert any("SGLang's choice" in a for a in plan.assumptions)
