"""verify --activation: a transformers forward built from a config, its cache against kvplan's hf rule.

transformers is optional: the forward tests skip without it (CI installs none); the one-line error,
the cache measurement helper and the skip rule run everywhere torch does. The models are the
published configs in tests/data/hf_configs (provenance: tests/data/hf_configs/SOURCES.yaml) shrunk
to a few thousand parameters, so the real transformers classes run in well under a second each.
On the CPU the activation peak is not measured (torch keeps no CPU peak statistics): asserted.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from kvplan.verify.errors import VerifyError

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TF = HAS_TORCH and importlib.util.find_spec("transformers") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
needs_tf = pytest.mark.skipif(not HAS_TF, reason="transformers not installed (optional): pip install transformers")
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hf_configs")
TINY = dict(hidden_size=64, intermediate_size=128, vocab_size=512, num_attention_heads=4, pad_token_id=0,
            bos_token_id=1, eos_token_id=1)


def _tiny(tmp_path, name: str, **over: object) -> str:
    """A published config with its sizes shrunk; its layer kinds, windows and cache classes kept."""
    with open(os.path.join(CONFIGS, name), encoding="utf-8") as f:
        data = json.load(f)
    data.pop("quantization_config", None)  # gpt-oss: mxfp4 kernels; the cache does not depend on them
    data.pop("layer_types", None)  # regenerated for the shrunk layer count
    data.update(TINY, **over)
    folder = tmp_path / name.removesuffix(".json")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    return str(folder)


def test_missing_transformers_is_one_line(monkeypatch):
    from kvplan.verify.activation import import_transformers

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(VerifyError, match=r"^--activation builds the model with transformers, which is not "
                                          r"installed: pip install transformers$"):
        import_transformers()


@needs_torch
def test_cache_bytes_counts_views_and_the_storage_they_keep_alive():
    import torch

    from kvplan.verify.activation import cache_bytes

    class Layer:  # the shape of a transformers cache layer, as far as the walk goes
        pass

    Layer.__module__ = "transformers.cache_utils"
    full = torch.zeros(2, 1, 20, 16, dtype=torch.bfloat16)
    layer = Layer()
    layer.keys = full[:, :, -7:, :]  # DynamicSlidingWindowLayer.update keeps a slice of the concatenation
    layer.values = torch.zeros(2, 1, 7, 16, dtype=torch.bfloat16)
    layer.window = torch.tensor(8)  # an index tensor: storage, not cache data
    held, storage = cache_bytes(torch, [layer])
    assert held == 2 * (2 * 7 * 16 * 2)
    assert storage == 2 * 20 * 16 * 2 + 2 * 7 * 16 * 2 + 8


@needs_tf
@pytest.mark.parametrize("name,over", [
    ("meta-llama__Llama-3.2-1B-Instruct.json", dict(num_hidden_layers=2, num_key_value_heads=2, head_dim=16)),
    # 5 sliding (window 8) + 1 full: DynamicCache keeps window - 1 tokens of the sliding layers
    ("google__gemma-3-1b-it.json", dict(num_hidden_layers=6, num_key_value_heads=1, head_dim=16,
                                        query_pre_attn_scalar=16, sliding_window=8)),
    # MLA: transformers 5.x caches the latent (kv_lora_rank) and the rope key
    ("deepseek-ai__DeepSeek-V2-Lite.json", dict(num_hidden_layers=3, num_key_value_heads=4, kv_lora_rank=32,
                                                qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                                                n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                                first_k_dense_replace=1)),
    # alternating sliding (8) and full layers, attention sinks, experts
    ("openai__gpt-oss-20b.json", dict(num_hidden_layers=4, num_key_value_heads=2, head_dim=16, sliding_window=8,
                                      intermediate_size=64, num_local_experts=4, num_experts_per_tok=2,
                                      experts_per_token=2)),
])
def test_transformers_cache_equals_kvplan_hf_rule_on_cpu(tmp_path, name, over):
    from kvplan.verify.activation import measure_activation

    r = measure_activation(_tiny(tmp_path, name, **over), batch=2, tokens=20, device="cpu")
    assert r.skipped is None
    assert r.cache_bytes == r.predicted_cache_bytes > 0 and r.cache_exact
    assert r.cache_storage_bytes >= r.cache_bytes and r.weights_bytes > 0
    # no allocator statistics on the CPU: the peak is traced storage by storage, and the notes say so
    assert r.peak_bytes is not None and r.activation_bytes == r.peak_bytes - r.cache_storage_bytes
    assert any("traced op by op" in n for n in r.notes)
    # the traced architectures, as kvplan's hf activation estimate derives them (tests/test_hf_activation.py)
    assert abs(r.activation_error_pct) <= 0.1, (r.activation_bytes, r.predicted_activation_bytes)
    assert r.blas_workspace_bytes is None  # CUDA only
    # 2 sequences of 20 tokens: 40 rows of embeddings, rotary tables of one sequence
    assert r.predicted_activation_bytes > 0 and "embeddings 40 x" in r.predicted_formula
    assert "positions 20 x" in r.predicted_formula


@needs_tf
def test_models_too_large_for_a_cpu_check_are_skipped_and_say_so():
    from kvplan.verify.activation import measure_activation

    # Qwen3-0.6B's real config: 1.4 GiB of bf16 weights, built on the meta device only
    r = measure_activation(os.path.join(CONFIGS, "Qwen__Qwen3-0.6B.json"), batch=1, tokens=16, device="cpu")
    assert r.skipped is not None and "use a GPU: skipped" in r.skipped
    assert r.cache_bytes == 0 and not r.cache_exact and r.weights_bytes > 1 << 30


@needs_tf
def test_a_kvplan_spec_is_not_a_config(tmp_path):
    from kvplan.verify.activation import load_config

    from kvplan.sources.resolve import load_model

    spec = load_model("Qwen/Qwen3-0.6B")
    with pytest.raises(VerifyError, match="needs a config.json"):
        load_config(os.path.join(os.path.dirname(CONFIGS), "..", "..", "model_specs", "Qwen__Qwen3-0.6B.yaml"), spec)


@needs_tf
def test_cli_activation_json(tmp_path):
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    folder = _tiny(tmp_path, "meta-llama__Llama-3.2-1B-Instruct.json", num_hidden_layers=2, num_key_value_heads=2,
                   head_dim=16)
    result = CliRunner().invoke(app, ["verify", folder, "--engine", "hf", "-b", "2", "-c", "20", "--device", "cpu",
                                      "--activation", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    act = json.loads(result.stdout)["activation"]
    assert set(act) >= {"weights_bytes", "cache_bytes", "cache_storage_bytes", "predicted_cache_bytes", "cache_exact",
                        "peak_bytes", "activation_bytes", "predicted_activation_bytes", "skipped", "notes",
                        "blas_workspace_bytes"}
    assert act["cache_exact"] and act["peak_bytes"] == act["activation_bytes"] + act["cache_storage_bytes"]
    assert act["blas_workspace_bytes"] is None
