"""kvplan's QuantizedCache bytes against transformers' own cache layers, built and filled on CPU.

Runs only where transformers (>= 5.21), optimum-quanto and hqq are installed:
``pip install "transformers>=5.21" optimum-quanto hqq``. Each case fills one transformers layer
(``QuantoQuantizedLayer``, ``HQQQuantizedLayer``, ``Fp8QuantizedLayer``) with a prefill and decode steps
of random K / V of the model's shapes and counts the bytes of every tensor the layer keeps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
cache_utils = pytest.importorskip("transformers.cache_utils")

import kvplan  # noqa: E402
from kvplan.engines import EngineOptions, get_engine, parse_version  # noqa: E402
from kvplan.dtypes import resolve_kv_dtype  # noqa: E402
from kvplan.errors import UsageError  # noqa: E402

CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def _stored_bytes(obj: object) -> int:
    """Bytes of every tensor reachable from a layer's state (tensor subclasses through their inner tensors)."""
    if obj is None:
        return 0
    if isinstance(obj, (tuple, list)):
        return sum(_stored_bytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_stored_bytes(o) for o in obj.values())
    if isinstance(obj, torch.Tensor):
        if type(obj) is not torch.Tensor and hasattr(obj, "__tensor_flatten__"):
            names, _ = obj.__tensor_flatten__()
            return sum(_stored_bytes(getattr(obj, name)) for name in names)
        return obj.numel() * obj.element_size()
    return 0


def _layer_state_bytes(layer: object) -> int:
    return sum(_stored_bytes(getattr(layer, name, None))
               for name in ("_quantized_keys", "_quantized_values", "keys", "values"))


def _make_layer(backend: str, opts: dict[str, int]) -> object:
    if backend == "quanto":
        pytest.importorskip("optimum.quanto")
        return cache_utils.QuantoQuantizedLayer(**opts)
    if backend == "hqq":
        pytest.importorskip("hqq")
        return cache_utils.HQQQuantizedLayer(**opts)
    if not hasattr(cache_utils, "Fp8QuantizedLayer"):
        pytest.skip("transformers < 5.21 has no fp8 cache")
    return cache_utils.Fp8QuantizedLayer()


def _fill(layer: object, shapes: tuple[tuple[int, int], tuple[int, int]], batch: int, prompt: int, steps: int,
          dtype: torch.dtype) -> None:
    (kh, kw), (vh, vw) = shapes
    gen = torch.Generator().manual_seed(0)
    layer.update(torch.randn(batch, kh, prompt, kw, generator=gen).to(dtype),
                 torch.randn(batch, vh, prompt, vw, generator=gen).to(dtype))
    for _ in range(steps):
        layer.update(torch.randn(batch, kh, 1, kw, generator=gen).to(dtype),
                     torch.randn(batch, vh, 1, vw, generator=gen).to(dtype))


# (model, backend, transformers layer options, batch, prompt, decode steps)
CASES = [
    ("meta-llama/Llama-3.1-8B", "quanto", {}, 1, 100, 0),
    ("meta-llama/Llama-3.1-8B", "quanto", {}, 2, 100, 127),
    ("meta-llama/Llama-3.1-8B", "quanto", {}, 1, 100, 128),
    ("meta-llama/Llama-3.1-8B", "quanto", {"nbits": 2, "residual_length": 32}, 3, 61, 70),
    ("meta-llama/Llama-3.1-8B", "quanto", {"axis_key": -1, "axis_value": -1, "q_group_size": 32}, 1, 64, 40),
    ("meta-llama/Llama-3.2-1B-Instruct", "quanto", {"q_group_size": 128, "residual_length": 16}, 2, 33, 20),
    ("microsoft/phi-4", "quanto", {"q_group_size": 32}, 1, 50, 9),
    ("microsoft/phi-4", "hqq", {"nbits": 4, "axis_key": 1, "axis_value": 0}, 1, 13, 2),
    ("deepseek-ai/DeepSeek-V2-Lite", "quanto", {}, 1, 40, 10),
    ("meta-llama/Llama-3.1-8B", "hqq", {}, 1, 100, 30),
    ("meta-llama/Llama-3.1-8B", "hqq", {"nbits": 3, "q_group_size": 32}, 2, 37, 5),
    ("meta-llama/Llama-3.2-1B-Instruct", "hqq", {"nbits": 8, "q_group_size": 32, "residual_length": 8}, 1, 20, 19),
    ("Qwen/Qwen3-0.6B", "hqq", {"nbits": 1, "axis_key": 1, "q_group_size": 128}, 1, 24, 3),
    ("meta-llama/Llama-3.1-8B", "fp8", {}, 2, 50, 7),
    ("deepseek-ai/DeepSeek-V2-Lite", "fp8", {}, 1, 17, 3),
]

_OPTION_NAMES = {"nbits", "axis_key", "axis_value", "q_group_size", "residual_length"}


@pytest.mark.slow
@pytest.mark.parametrize(("model", "backend", "opts", "batch", "prompt", "steps"), CASES)
def test_layer_bytes_match_transformers_quantized_layer(model: str, backend: str, opts: dict[str, int],
                                                        batch: int, prompt: int, steps: int) -> None:
    assert set(opts) <= _OPTION_NAMES
    spec = kvplan.load_model(model)
    engine = get_engine("hf")
    version = parse_version(transformers.__version__.rsplit(".", 1)[0])
    options = EngineOptions(kv_cache="quantized", backend=backend, prompt_len=prompt, **opts)
    kv_dtype = resolve_kv_dtype("bfloat16", spec.dtype)
    layout = engine.layout(spec, kv_dtype, version, options)
    group = layout.groups[0]
    layer = _make_layer(backend, opts)
    _fill(layer, (group.k_shape, group.v_shape), batch, prompt, steps, torch.bfloat16)
    assert group.layer_bytes(prompt + steps, batch) == _layer_state_bytes(layer)


def test_full_precision_residual_is_what_transformers_keeps() -> None:
    # the residual after g decode steps is g mod residual_length (QuantizedLayer.update)
    pytest.importorskip("optimum.quanto")
    for steps in (0, 1, 15, 16, 17, 40):
        layer = cache_utils.QuantoQuantizedLayer(residual_length=16)
        _fill(layer, ((2, 64), (2, 64)), 1, 10, steps, torch.float32)
        kept = layer.keys.shape[-2] if layer.keys.dim() == 4 else 0
        rule = kvplan.engines.rules.QuantizedResidual(16, prompt_len=10)
        assert rule.split(10 + steps) == (10 + steps - kept, kept)


@pytest.mark.parametrize(("config", "accepted"), [
    ("meta-llama__Llama-3.1-8B.json", True),
    ("google__gemma-2-9b-it.json", False),
    ("mistralai__Mistral-7B-v0.1.json", False),
])
def test_refuses_the_models_transformers_refuses(config: str, accepted: bool) -> None:
    pytest.importorskip("optimum.quanto")
    raw = json.loads((CONFIGS / config).read_text())
    hf_config = transformers.AutoConfig.for_model(**raw)
    try:
        cache_utils.QuantizedCache(backend="quanto", config=hf_config)
        theirs = True
    except ValueError as err:
        assert "only full attention" in str(err)
        theirs = False
    assert theirs is accepted
    spec = kvplan.load_model(str(CONFIGS / config))
    if accepted:
        kvplan.estimate(spec, engine="hf", contexts=[1024], engine_options={"kv_cache": "quantized"})
    else:
        with pytest.raises(UsageError) as refused:
            kvplan.estimate(spec, engine="hf", contexts=[1024], engine_options={"kv_cache": "quantized"})
        assert "full attention" in str(refused.value)


def _backend_shapes(state: object) -> list[tuple[int, ...]]:
    if isinstance(state, tuple):  # hqq (W_q, meta) or fp8 (tensor, scale)
        data, extra = state
        if isinstance(extra, dict):
            width = 4 if data.dtype == torch.int32 else 1  # kvplan counts 3-bit int32 rows as uint8 columns
            return [(data.shape[0], data.shape[1] * width), tuple(extra["scale"].shape), tuple(extra["zero"].shape)]
        return [tuple(data.shape), tuple(extra.shape)]
    return [tuple(state._data._data.shape), tuple(state._scale.shape), tuple(state._shift.shape)]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "backend", "opts", "batch", "prompt", "steps"), CASES)
def test_verify_shapes_are_transformers_shapes(model: str, backend: str, opts: dict[str, int], batch: int,
                                               prompt: int, steps: int) -> None:
    spec = kvplan.load_model(model)
    engine = get_engine("hf")
    version = parse_version(transformers.__version__.rsplit(".", 1)[0])
    options = EngineOptions(kv_cache="quantized", backend=backend, prompt_len=prompt, **opts)
    layout = engine.layout(spec, resolve_kv_dtype("bfloat16", spec.dtype), version, options)
    group = layout.groups[0]
    layer = _make_layer(backend, opts)
    _fill(layer, (group.k_shape, group.v_shape), batch, prompt, steps, torch.bfloat16)
    plan = engine.tensor_plan(spec, layout, batch, prompt + steps)
    ours = [b.shape for b in plan.buffers if b.views[0].layer == group.first_layer and b.views[0].role.startswith("K")
            and not b.views[0].role.endswith("residual")]
    assert [tuple(s) for s in ours] == _backend_shapes(layer._quantized_keys)


# ------------------------------------------------------------------------------------------------
# The whole cache, end to end: kvplan.estimate against transformers' QuantizedCache itself


_TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
               "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
               "rms_norm_eps": 1e-5, "tie_word_embeddings": False}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["quanto", "hqq", "fp8"])
@pytest.mark.parametrize("decoded", [0, 1, 50, 127, 128, 129])
def test_estimate_equals_transformers_quantized_cache(tmp_path: Path, backend: str, decoded: int) -> None:
    # issue 21: a 4-layer Llama (2 KV heads, head_dim 64, bf16), 1,000-token prompt, then `decoded` steps: the
    # quantized prefill plus the full-precision residual (decoded mod 128), every tensor transformers keeps
    # (quantized data, scales, zero points, fp8's per-tensor scales, the residual), summed over the layers
    if backend == "quanto":
        pytest.importorskip("optimum.quanto")
    elif backend == "hqq":
        pytest.importorskip("hqq")
    elif not hasattr(cache_utils, "Fp8QuantizedLayer"):
        pytest.skip("transformers < 5.21 has no fp8 cache")
    (tmp_path / "config.json").write_text(json.dumps(_TINY_LLAMA))
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    opts = {} if backend == "fp8" else {"nbits": 4}
    cache = cache_utils.QuantizedCache(backend=backend, config=config, **opts)
    gen = torch.Generator().manual_seed(0)
    prompt = 1000
    for tokens in [prompt] + [1] * decoded:
        for index in range(config.num_hidden_layers):
            cache.update(torch.randn(1, 2, tokens, 64, generator=gen).to(torch.bfloat16),
                         torch.randn(1, 2, tokens, 64, generator=gen).to(torch.bfloat16), index)
    held = sum(_layer_state_bytes(layer) for layer in cache.layers)
    options = {"kv_cache": "quantized", "backend": backend, **opts}
    row = kvplan.estimate(str(tmp_path / "config.json"), engine="hf", prompt_len=prompt, output_len=decoded,
                          engine_options=options).rows[0]
    assert row.context == prompt + decoded
    assert row.kv_bytes == held
    if backend == "quanto" and decoded == 50:  # the issue's own figure: 1,000 tokens quantized + 50 in bf16
        assert held == 678_400
