"""The hf engine's prefill activation peak (kvplan/engines/hf/activation.py).

(a) Goldens: the real configs at 1 x 4,096 tokens, against the peaks an NVIDIA H200 measured with
``kvplan verify CONFIG --engine hf --activation`` (torch 2.11 + cu130, transformers 5.17;
docs/verification-gpu.md, section "--activation"), and the terms' scaling.
(b) On the CPU: tiny configs of each traced architecture run through transformers while a
TorchDispatchMode follows every tensor's storage; the live bytes' peak less the cache it built is what
kvplan estimates. Falcon's SDPA is replaced by PyTorch's math kernel as CUDA runs it (the CPU's flash kernel
takes head-broadcast K/V with a mask; CUDA's fused kernels do not). transformers is optional: skipped
without it, as the other verify tests are.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os

import pytest

from kvplan.engines.hf.activation import prefill_activation
from kvplan.sources.resolve import load_model

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TF = HAS_TORCH and importlib.util.find_spec("transformers") is not None
needs_tf = pytest.mark.skipif(not HAS_TF, reason="transformers not installed (optional): pip install transformers")
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hf_configs")

# activation peak (max_memory_allocated less the cache's storage) the H200 measured, batch 1 x 4,096 tokens
H200 = {
    "meta-llama/Llama-3.1-8B": 488_669_184,
    "Qwen/Qwen3-8B": 438_337_536,
    "mistralai/Mistral-7B-v0.1": 505_462_528,
    "deepseek-ai/DeepSeek-V2-Lite": 674_325_504,
    "openai/gpt-oss-20b": 6_684_186_528,
    "tiiuae/falcon-7b-instruct": 11_114_705_408,
}
# kvplan's figures: the dense ones to the byte; Mistral 32 cache counters of 8 B the allocator rounds to 512 B;
# gpt-oss 1 MiB, falcon 4 MiB of workspaces kvplan does not model
ESTIMATE = {
    "meta-llama/Llama-3.1-8B": 488_669_184,
    "Qwen/Qwen3-8B": 438_337_536,
    "mistralai/Mistral-7B-v0.1": 505_446_400,
    "deepseek-ai/DeepSeek-V2-Lite": 674_324_480,
    "openai/gpt-oss-20b": 6_683_131_904,
    "tiiuae/falcon-7b-instruct": 11_110_510_592,
}


# Gemma 3 on the same H200, second GPU session (tools/trace_activation.py CONFIG cuda:0 BATCH TOKENS; torch
# 2.11 + cu130, transformers 5.17): the live storages' peak less the cache's storage. Derived on the CPU from tiny
# configs (two rotary tables, q / k norms, four norms a layer), then checked here on the real configs.
GEMMA_TRACE = {
    ("google__gemma-3-1b-it.json", 1, 1024): 55_058_608,
    ("google__gemma-3-1b-it.json", 1, 2048): 112_214_192,
    ("google__gemma-3-1b-it.json", 1, 4096): 232_816_816,
    ("google__gemma-3-1b-it.json", 1, 8192): 499_187_888,
    ("google__gemma-3-1b-it.json", 2, 4096): 440_434_864,
    ("google__gemma-3-27b-it.json", 1, 4096): 725_647_776,
}
# ``kvplan verify CONFIG --engine hf --activation --device cuda:0`` in a fresh process, before verify warmed
# cuBLAS: its peak held the 32 MiB cuBLAS workspace (sm_90) of the process's first product
VERIFY_FRESH = {
    ("google__gemma-3-1b-it.json", 1, 8192): 532_753_232,
    ("google__gemma-3-27b-it.json", 1, 4096): 759_228_000,
    ("meta-llama__Llama-3.1-8B.json", 4, 2048): 1_007_697_920,
}
CUBLAS_WORKSPACE_SM90 = 4096 * 8 * 1024  # CublasHandlePool.cpp parseChosenWorkspaceSize, sm_90 default
# the same in fresh processes since verify makes the workspaces before the forward (third H200 call; each run also
# reported blas_workspace_bytes 34,603,008: cuBLAS 32 MiB + cuBLASLt 1 MiB)
VERIFY_WARMED = {
    ("google__gemma-3-1b-it.json", 1, 8192): 499_198_800,
    ("google__gemma-3-1b-it.json", 2, 4096): 440_445_776,
    ("google__gemma-3-27b-it.json", 1, 4096): 725_673_568,
    ("meta-llama__Llama-3.1-8B.json", 4, 2048): 974_143_488,
    ("Qwen__Qwen3-8B.json", 1, 4096): 438_337_536,
}


@pytest.mark.parametrize("case", sorted(GEMMA_TRACE), ids=lambda c: f"{c[0][7:-8]}-{c[1]}x{c[2]}")
def test_gemma3_against_the_h200_traces(case):
    name, batch, tokens = case
    est = prefill_activation(load_model(os.path.join(CONFIGS, name)), batch, tokens)
    # short by the int64 scalars transformers keeps (8 B each, 22 for 26 layers, 52 for 62)
    assert 0 <= GEMMA_TRACE[case] - est.bytes <= 8 * 52
    assert not any("not traced" in a for a in est.assumptions)


@pytest.mark.parametrize("case", sorted(VERIFY_FRESH), ids=lambda c: f"{c[0][:-5]}-{c[1]}x{c[2]}")
def test_a_fresh_process_peak_is_the_estimate_plus_the_cublas_workspace(case):
    name, batch, tokens = case
    est = prefill_activation(load_model(os.path.join(CONFIGS, name)), batch, tokens).bytes
    # the rest: allocator rounding of those scalars (512 B blocks)
    assert 0 <= VERIFY_FRESH[case] - CUBLAS_WORKSPACE_SM90 - est <= 512 * 52


@pytest.mark.parametrize("case", sorted(VERIFY_WARMED), ids=lambda c: f"{c[0][:-5]}-{c[1]}x{c[2]}")
def test_verify_measures_the_estimate_in_a_fresh_process(case):
    name, batch, tokens = case
    est = prefill_activation(load_model(os.path.join(CONFIGS, name)), batch, tokens).bytes
    assert 0 <= VERIFY_WARMED[case] - est <= 512 * 52  # the int64 scalars' 512 B blocks


@pytest.mark.parametrize("model", sorted(H200))
def test_real_configs_against_the_h200_peaks(model):
    est = prefill_activation(load_model(model), 1, 4096)
    assert est.bytes == ESTIMATE[model]
    assert abs(est.bytes - H200[model]) <= 0.0005 * H200[model]


def test_the_widest_moment_each_model_peaks_at():
    def formula(model: str) -> str:
        return prefill_activation(load_model(model), 1, 4096).formula

    assert "gated MLP: 4,096 x 110,592 B" in formula("meta-llama/Llama-3.1-8B")  # 3 x 14,336 + 3 x 4,096, bf16
    assert "bool sliding mask 4,096^2 B" in formula("mistralai/Mistral-7B-v0.1")  # window 4,096 <= the prompt
    assert "mask" not in formula("meta-llama/Llama-3.1-8B")  # SDPA's is_causal: no mask materialized
    assert "MoE grouped_mm weighted tail: 24,576 rows" in formula("deepseek-ai/DeepSeek-V2-Lite")  # 4,096 x top-6
    assert "eager attention with sinks: 64 x 4,096 x (3 x 4,096 + 2) x 2 B" in formula("openai/gpt-oss-20b")
    assert "2 eager mask(s) 1 x 4,096^2 x 2 B" in formula("openai/gpt-oss-20b")
    assert "math SDPA (fp32 scores" in formula("tiiuae/falcon-7b-instruct")
    gemma = formula(os.path.join(CONFIGS, "google__gemma-3-1b-it.json"))
    assert "rotary + positions 4,096 x 2,056 B" in gemma  # two rotary tables: 2 x (cos, sin) x 256 x 2 B + 8


def test_the_kernel_choice_is_said():
    falcon = prefill_activation(load_model("tiiuae/falcon-7b-instruct"), 1, 4096).assumptions
    llama = prefill_activation(load_model("meta-llama/Llama-3.1-8B"), 1, 4096).assumptions
    oss = prefill_activation(load_model("openai/gpt-oss-20b"), 1, 4096).assumptions
    assert any("math kernel" in a for a in falcon)
    assert any("flash or memory-efficient" in a for a in llama)
    assert any("eager attention" in a for a in oss)
    assert all("transformers 5.17" in a[0] for a in (falcon, llama, oss))


def test_terms_scale_with_the_prompt():
    llama, falcon = load_model("meta-llama/Llama-3.1-8B"), load_model("tiiuae/falcon-7b-instruct")
    # linear: twice the tokens, twice the bytes; twice the sequences likewise, the rotary tables aside
    assert prefill_activation(llama, 1, 8192).bytes == 2 * prefill_activation(llama, 1, 4096).bytes
    rope = 4096 * (2 * 128 * 2 + 8)
    assert prefill_activation(llama, 2, 4096).bytes == 2 * prefill_activation(llama, 1, 4096).bytes - rope
    # falcon's scores are quadratic: 71 heads x 9 B + the converted mask per (query, key) pair
    small, big = prefill_activation(falcon, 1, 2048).bytes, prefill_activation(falcon, 1, 4096).bytes
    assert 3.8 < big / small < 4.0
    assert big - 2 * small == (4096 ** 2 - 2 * 2048 ** 2) * (9 * 71 + 2) + (4096 ** 2 - 2 * 2048 ** 2)


def test_untraced_model_types_and_layer_kinds_say_so():
    gemma2 = prefill_activation(load_model(os.path.join(CONFIGS, "google__gemma-2-9b-it.json")), 1, 4096)
    assert any("model_type gemma2" in a and "not traced" in a for a in gemma2.assumptions)
    mamba = prefill_activation(load_model("state-spaces/mamba-2.8b-hf"), 1, 4096)
    assert any("not traced for recurrent layers" in a for a in mamba.assumptions)


def test_the_hf_budget_uses_it():
    from kvplan.budgets.base import GIB, Settings
    from kvplan.engines import get_engine
    from kvplan.engines.capacity import Demand

    spec, engine = load_model("meta-llama/Llama-3.1-8B"), get_engine("hf")
    budget = engine.budget(spec, 80 * GIB, 1, 1, (5, 23), Demand(4096, 4096, 1), Settings())
    item = next(i for i in budget.items if i.name == "activation")
    assert item.bytes == ESTIMATE["meta-llama/Llama-3.1-8B"] and "gated MLP" in item.note


def test_an_overdrawn_budget_holds_no_request():
    """A budget whose weights and activation exceed the GPU holds 0 requests, not a negative number (the byte pool's
    concurrency is KV bytes / one request's bytes, and the KV bytes are negative there)."""
    from kvplan.plan import max_batch

    plan = max_batch("meta-llama/Llama-3.1-70B", gpu="L4", engine="hf", context=8192)
    assert plan.per_gpu.kv_cache_bytes < 0 and not plan.fits
    assert plan.max_concurrency == 0.0 and plan.max_batch == 0


# --- (b) the CPU trace ------------------------------------------------------------------------------------


def _live_peak(torch, run, math_sdpa: bool) -> int:
    """The peak of bytes held by storages the forward allocated (kvplan.verify.live), less the cache it built."""
    from kvplan.verify.activation import cache_bytes
    from kvplan.verify.live import trace

    net, ids = run
    stand_in = {"scaled_dot_product_attention": lambda q, k, v, mask=None, *_, **kw: _cuda_math_sdpa(
        torch, q, k, v, kw.get("attn_mask", mask), kw.get("scale"))} if math_sdpa else None
    with torch.inference_mode():
        out, peak = trace(torch, lambda: net(input_ids=ids, use_cache=True, logits_to_keep=1),
                          (*net.parameters(), *net.buffers(), ids), replace=stand_in)
    cache = getattr(out, "cache", None)
    cache = cache if cache is not None else out.past_key_values
    return peak.bytes - cache_bytes(torch, cache)[1]


def _cuda_math_sdpa(torch, q, k, v, mask, scale):
    """PyTorch's _scaled_dot_product_attention_math as CUDA runs it (fp32, in-place mask add, _safe_softmax
    writing into its softmax) -- what falcon's multi-query SDPA falls back to there."""
    if mask is not None and mask.dtype == torch.bool:  # convert_boolean_attn_mask
        additive = torch.zeros_like(mask, dtype=q.dtype)
        additive.masked_fill_(mask.logical_not(), float("-inf"))
        mask = additive
    qa, ka, va = q.float(), k.float(), v.float()
    factor = math.sqrt(scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    query = qa * factor
    attn = torch.matmul(query, ka.transpose(-2, -1) * factor)
    if mask is not None:
        attn.add_(mask)
    out = torch.softmax(attn, -1)
    masked = attn.isneginf()
    torch.where(masked.all(-1, keepdim=True), torch.zeros((), dtype=out.dtype), out, out=out)
    del masked, attn
    return torch.matmul(out, va).to(q.dtype)


TINY = [
    ("meta-llama__Llama-3.1-8B.json", dict(intermediate_size=224, num_key_value_heads=2, head_dim=16)),
    # a narrow MLP: the q rotary of the attention is the widest moment
    ("meta-llama__Llama-3.1-8B.json", dict(intermediate_size=8, num_attention_heads=8, num_key_value_heads=2,
                                           head_dim=16)),
    ("Qwen__Qwen3-8B.json", dict(intermediate_size=192, num_key_value_heads=2, head_dim=16)),
    # a window no longer than the prompt: SDPA gets a bool mask
    ("mistralai__Mistral-7B-v0.1.json", dict(intermediate_size=224, num_key_value_heads=2, head_dim=16,
                                             sliding_window=48)),
    ("deepseek-ai__DeepSeek-V2-Lite.json", dict(intermediate_size=160, num_key_value_heads=4, kv_lora_rank=32,
                                                q_lora_rank=48, qk_rope_head_dim=8, qk_nope_head_dim=16,
                                                v_head_dim=16, n_routed_experts=8, num_experts_per_tok=3,
                                                moe_intermediate_size=32, first_k_dense_replace=1,
                                                num_hidden_layers=3)),
    ("openai__gpt-oss-20b.json", dict(intermediate_size=96, num_attention_heads=8, num_key_value_heads=2,
                                      head_dim=16, sliding_window=32, num_local_experts=4, num_experts_per_tok=2,
                                      experts_per_token=2)),
    ("tiiuae__falcon-7b-instruct.json", dict()),
    # a narrow MLP: Qwen3's q norm (before k and v exist) is the widest moment
    ("Qwen__Qwen3-8B.json", dict(intermediate_size=8, num_attention_heads=8, num_key_value_heads=2, head_dim=16)),
    # Gemma 3: the gated MLP; with a narrow MLP the q norm; with a wide hidden size the norm after the MLP
    ("google__gemma-3-1b-it.json", dict(intermediate_size=224, num_key_value_heads=1, head_dim=16, sliding_window=48,
                                        num_hidden_layers=6)),
    ("google__gemma-3-1b-it.json", dict(intermediate_size=8, num_key_value_heads=1, head_dim=16, sliding_window=48,
                                        num_hidden_layers=6)),
    ("google__gemma-3-1b-it.json", dict(intermediate_size=8, hidden_size=256, num_attention_heads=2,
                                        num_key_value_heads=1, head_dim=8, sliding_window=48, num_hidden_layers=6)),
]


def _tiny_net(tmp_path, name, over, dtype="bfloat16"):
    """A published config shrunk (``over``), as kvplan reads it and as transformers builds it, random weights."""
    import torch
    import transformers as tf

    with open(os.path.join(CONFIGS, name), encoding="utf-8") as f:
        data = json.load(f)
    for key in ("quantization_config", "layer_types", "auto_map"):
        data.pop(key, None)
    data.update(dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, vocab_size=512, pad_token_id=0,
                     bos_token_id=1, eos_token_id=1, torch_dtype=dtype), **over)
    (tmp_path / "config.json").write_text(json.dumps(data))
    spec = load_model(str(tmp_path))
    cfg = tf.AutoConfig.for_model(data.pop("model_type"), **data)
    torch.manual_seed(0)
    try:
        net = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    except ValueError:  # gpt-oss: no SDPA (attention sinks)
        net = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    return spec, net.to(getattr(torch, dtype)).eval()


@needs_tf
@pytest.mark.parametrize("name,over", TINY[-4:], ids=["qwen3-narrow", "gemma3", "gemma3-narrow", "gemma3-wide"])
def test_tiny_fp32_forward_matches_the_estimate(tmp_path, name, over):
    """In fp32 the norms' upcast is no copy (``x.to(float32)`` returns x): q and k norms weigh less."""
    import torch

    spec, net = _tiny_net(tmp_path, name, over, "float32")
    assert spec.dtype == "float32"
    ids = torch.randint(0, 512, (2, 96))
    measured, estimate = _live_peak(torch, (net, ids), math_sdpa=False), prefill_activation(spec, 2, 96).bytes
    assert abs(estimate - measured) <= 0.005 * measured, (estimate, measured)  # exact under transformers 5.24


@needs_tf
@pytest.mark.parametrize("name,over", TINY, ids=[f"{n.split('__')[1][:-5]}-{i}" for i, (n, _) in enumerate(TINY)])
@pytest.mark.parametrize("batch,tokens", [(1, 64), (2, 96)])
def test_tiny_transformers_forward_matches_the_estimate(tmp_path, name, over, batch, tokens):
    import torch

    spec, net = _tiny_net(tmp_path, name, over)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.02)
    ids = torch.randint(0, 512, (batch, tokens))
    measured = _live_peak(torch, (net, ids), math_sdpa=spec.model_type == "falcon")
    estimate = prefill_activation(spec, batch, tokens).bytes
    # exact for the dense models; a few small per-row index tensors of the MoE path move between releases
    assert abs(estimate - measured) <= 0.005 * measured, (estimate, measured)

