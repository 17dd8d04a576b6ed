"""ModelSpec.mtp_layers: the MTP layers a checkpoint ships, read from its config, planned by every
engine's ``mtp`` and refused where the model has none."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvplan
from kvplan.errors import ConfigError, UsageError
from kvplan.sources.hf_config import read_config_file, spec_and_count, spec_from_config
from kvplan.sources.resolve import load_model
from kvplan.sources.yaml_spec import dump_spec_yaml, spec_to_dict, validate_spec
from kvplan.spec import LayerSpec, ModelSpec
from conftest import DATA, run_cli


# ---- the count each family's real config gives ----------------------------------------------------

# (config file, MTP layers): the configs' own num_nextn_predict_layers (provenance in
# tests/data/hf_configs/SOURCES.yaml); Qwen3-Next's config leaves it out and its checkpoints ship one
# mtp.* layer (vLLM qwen3_next_mtp.py: getattr(config, "num_nextn_predict_layers", 1)).
GOLDEN = [
    ("hf_configs/deepseek-ai__DeepSeek-V3.json", 1),           # "num_nextn_predict_layers": 1
    ("hf_configs/deepseek-ai__DeepSeek-R1.json", 1),           # "num_nextn_predict_layers": 1
    ("hf_configs/zai-org__GLM-4.5-Air.json", 1),               # "num_nextn_predict_layers": 1 (glm4_moe)
    ("hf_configs_transcribed/zai-org__GLM-4.5.json", 1),       # "num_nextn_predict_layers": 1 (glm4_moe)
    ("hf_configs/moonshotai__Kimi-K2-Instruct.json", 0),       # "num_nextn_predict_layers": 0 (kimi_k2)
    ("hf_configs/deepseek-ai__DeepSeek-V2-Lite.json", 0),      # absent (deepseek_v2)
    ("hf_configs/Qwen__Qwen3-Next-80B-A3B-Thinking.json", 1),  # absent: qwen3_next ships 1, said
    ("hf_configs/meta-llama__Llama-3.1-8B.json", 0),           # absent (llama)
    ("hf_configs/Qwen__Qwen3-30B-A3B.json", 0),                # absent (qwen3_moe)
    ("hf_configs/openai__gpt-oss-20b.json", 0),                # absent (gpt_oss)
]


@pytest.mark.parametrize(("config", "layers"), GOLDEN, ids=lambda v: str(v).rsplit("/", 1)[-1])
def test_each_family_reads_the_count_its_config_gives(config, layers):
    spec, count, _ = spec_and_count(read_config_file(DATA / config), model_id=config)
    assert spec.mtp_layers == layers
    assert count is not None  # the parameter count sees the same layers: counted under 'mtp'
    assert (count.by_component["mtp"] > 0) == (layers > 0)
    assumed = [a for a in spec.assumptions if "MTP" in a]
    assert assumed == ([] if "Qwen3-Next" not in config else [
        "qwen3_next: num_nextn_predict_layers absent: 1 MTP layer (mtp.*), as the Qwen3-Next-80B-A3B "
        "checkpoints ship and vLLM / SGLang build"])


def test_the_count_scales_the_mtp_parameters():
    config = read_config_file(DATA / "hf_configs/deepseek-ai__DeepSeek-V3.json")
    one = spec_and_count(config, model_id="v3")[1]
    two_spec, two, _ = spec_and_count({**config, "num_nextn_predict_layers": 2}, model_id="v3")
    assert two_spec.mtp_layers == 2 and two.by_component["mtp"] == 2 * one.by_component["mtp"]
    qwen = read_config_file(DATA / "hf_configs/Qwen__Qwen3-Next-80B-A3B-Thinking.json")
    none_spec, none, _ = spec_and_count({**qwen, "num_nextn_predict_layers": 0}, model_id="q")
    assert none_spec.mtp_layers == 0 and none.by_component["mtp"] == 0
    assert not any("MTP" in a for a in none_spec.assumptions)


@pytest.mark.parametrize("value", [-1, 1.5, "1", True, 10**9])
def test_a_bad_count_in_a_config_is_one_error_naming_it(value):
    config = read_config_file(DATA / "hf_configs/deepseek-ai__DeepSeek-V3.json")
    with pytest.raises(ConfigError, match="num_nextn_predict_layers"):
        spec_from_config({**config, "num_nextn_predict_layers": value}, model_id="bad")


@pytest.mark.parametrize(("model", "layers"), [
    ("deepseek-ai/DeepSeek-V3", 1), ("deepseek-ai/DeepSeek-R1", 1), ("zai-org/GLM-4.5", 1),
    ("zai-org/GLM-4.5-Air", 1), ("Qwen/Qwen3-Next-80B-A3B-Thinking", 1), ("moonshotai/Kimi-K2-Instruct", 0),
    ("meta-llama/Llama-3.1-8B", 0), ("deepseek-ai/DeepSeek-V2-Lite", 0),
])
def test_bundled_specs_carry_the_count(model, layers):
    assert load_model(model).mtp_layers == layers


# ---- the spec file format --------------------------------------------------------------------------

def _spec_data(**more):
    return {"id": "m", "model_type": "deepseek_v3", "layers": [{"kind": "mla", "count": 2, "kv_lora_rank": 512,
                                                                 "qk_rope_head_dim": 64}], **more}


def test_yaml_specs_give_the_count_and_leave_out_zero():
    spec = validate_spec(_spec_data(mtp_layers=2), "x.yaml")
    assert spec.mtp_layers == 2 and "mtp_layers: 2\n" in dump_spec_yaml(spec)
    plain = validate_spec(_spec_data(), "x.yaml")  # specs written before the field: none
    assert plain.mtp_layers == 0 and "mtp_layers" not in spec_to_dict(plain)


@pytest.mark.parametrize("value", [-1, "1", True, 1.5])
def test_a_bad_count_in_a_spec_is_one_error_naming_it(value):
    with pytest.raises(ConfigError, match=r"^x\.yaml: mtp_layers: "):
        validate_spec(_spec_data(mtp_layers=value), "x.yaml")


def test_the_schema_shows_the_field_with_its_default():
    from kvplan.sources.yaml_spec import spec_adapter

    prop = spec_adapter().json_schema()["properties"]["mtp_layers"]
    assert prop["default"] == 0 and prop["minimum"] == 0 and "num_nextn_predict_layers" in prop["description"]


@given(st.integers(min_value=0, max_value=64))
def test_the_count_round_trips_through_yaml(layers):
    import yaml

    spec = ModelSpec(id="m", model_type="deepseek_v3", mtp_layers=layers,
                     layers=(LayerSpec(kind="mla", count=3, kv_lora_rank=512, qk_rope_head_dim=64),))
    assert validate_spec(yaml.safe_load(dump_spec_yaml(spec)), "x").mtp_layers == layers


# ---- every engine: the model's own count, refused where it has none --------------------------------

ENGINES = ("vllm", "sglang", "trtllm", "hf")


def _row(model, engine, context=8192, **kw):
    return kvplan.estimate(model, contexts=[context], batches=[1], engine=engine, speculative_method="mtp",
                           **kw).rows[0]


# DeepSeek-V3 (61 MLA layers + its 1 MTP layer, 576 x 2 B a token and layer), 8,192 tokens, k = 1 unless
# given: the same numbers as before the count was read from the model (the engines' rules:
# tests/test_sharing_speculative.py, test_speculative_engines.py, test_speculative_hf.py)
V3_GOLDEN = {
    # vLLM: context + 2k slots in FlashMLA blocks of 64: ceil(8194 / 64) = 129 blocks of 64 x 62 layers
    "vllm": 129 * 64 * 1152 * 62,
    # SGLang: page size 1, (3, 1, 4) for deepseek_v3: max(3 x 1, 4) = 4 slots, 62 layers
    "sglang": (8192 + 4) * 1152 * 62,
    # TensorRT-LLM: one-model MTP, 2k - 1 = 1 extra slot, tokens_per_block 32: ceil(8193 / 32) = 257 blocks
    "trtllm": 257 * 32 * 1152 * 62,
    # transformers: target context + 1 (61 layers), the MTP layer context - 1
    "hf": 61 * 1152 * 8193 + 1152 * 8191,
}


@pytest.mark.parametrize("engine", ENGINES)
def test_deepseek_v3_plans_its_own_one_mtp_layer_as_before(engine):
    row = _row("deepseek-ai/DeepSeek-V3", engine)
    assert row.kv_bytes == V3_GOLDEN[engine]
    assert row.kv_bytes == _row("deepseek-ai/DeepSeek-V3", engine, num_nextn_predict_layers=1).kv_bytes
    result = kvplan.estimate("deepseek-ai/DeepSeek-V3", contexts=[8192], engine=engine, speculative_method="mtp")
    assert not any("give the count" in a or "as given" in a for a in result.assumptions)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B", "moonshotai/Kimi-K2-Instruct",
                                   "deepseek-ai/DeepSeek-V2-Lite"])
def test_a_model_without_mtp_layers_is_refused(engine, model):
    with pytest.raises(UsageError, match=re.escape(f"{model} ships no MTP layers (num_nextn_predict_layers")) as err:
        _row(model, engine)
    assert err.value.field == "speculative_method"


def test_max_batch_refuses_it_too():
    with pytest.raises(UsageError, match="ships no MTP layers") as err:
        kvplan.max_batch("meta-llama/Llama-3.1-8B", gpu="H100", speculative_method="mtp",
                         num_speculative_tokens=1)
    assert err.value.field == "speculative_method"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_library_override_still_plans_and_says_so(engine):
    result = kvplan.estimate("meta-llama/Llama-3.1-8B", contexts=[4096], engine=engine, speculative_method="mtp",
                             num_nextn_predict_layers=1)
    assert "MTP: 1 layer(s) as given (num_nextn_predict_layers=); meta-llama/Llama-3.1-8B ships 0" \
        in result.assumptions
    plain = kvplan.estimate("meta-llama/Llama-3.1-8B", contexts=[4096], engine=engine)
    assert result.rows[0].kv_bytes > plain.rows[0].kv_bytes  # the layer it was told of joins the cache


def test_a_spec_with_two_layers_plans_two():
    base = load_model("deepseek-ai/DeepSeek-V3")
    two = replace(base, mtp_layers=2)
    one = _row(base, "sglang", num_speculative_tokens=2).kv_bytes
    # SGLang: k = 2 is 2 steps, 3 draft tokens: 8192 + 3 slots, and one more MLA layer
    assert _row(two, "sglang", num_speculative_tokens=2).kv_bytes == one + (8192 + 3) * 1152
    # vLLM: k defaults to the layer count (n_predict) and must be a multiple of it above it
    assert _row(two, "vllm").kv_bytes == _row(two, "vllm", num_speculative_tokens=2).kv_bytes
    with pytest.raises(UsageError, match="multiple of 2") as err:
        _row(two, "vllm", num_speculative_tokens=3)
    assert err.value.field == "num_speculative_tokens"
    assert _row(two, "vllm", num_speculative_tokens=4).kv_bytes > 0


# ---- the CLI and check -----------------------------------------------------------------------------

def test_cli_refusal_is_one_line_naming_the_flag():
    code, out, err = run_cli(["estimate", "meta-llama/Llama-3.1-8B", "--speculative-method", "mtp", "-c", "4k"])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "kvplan: error: --speculative-method: meta-llama/Llama-3.1-8B ships no MTP layers")


def test_check_finds_the_engine_refusing_mtp(tmp_path):
    from kvplan.deploy import check

    script = tmp_path / "serve.sh"
    script.write_text("vllm serve meta-llama/Llama-3.1-8B --max-model-len 8k "
                      "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'\n")
    report = check([str(script)], gpu="H100-80GB")
    found = [f for f in report.findings if f.code == "engine-refuses"]
    assert len(found) == 1 and "ships no MTP layers" in found[0].message
    assert report.exit_code == 1
    ok = tmp_path / "v3.sh"
    ok.write_text("vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --max-model-len 8k "
                  "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'\n")
    assert not [f for f in check([str(ok)], gpu="H200").findings if f.code == "engine-refuses"]
