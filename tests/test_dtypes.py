"""KV dtype sizes against the engines' own page arithmetic."""

import pytest

from kvplan.dtypes import KV_DTYPES, resolve_kv_dtype
from kvplan.errors import UsageError


@pytest.mark.parametrize("name,elems,expected", [
    ("bfloat16", 128, 256), ("float32", 128, 512), ("fp8", 128, 128), ("fp8_e5m2", 64, 64),
    # vLLM AttentionSpec.page_size_bytes: + one fp32 scale per token, head and K/V
    ("int8_per_token_head", 128, 132), ("fp8_per_token_head", 128, 132), ("int4_per_token_head", 128, 68),
    # vLLM nvfp4: D/2 packed + D/16 fp8 scales = 72 B for D = 128
    ("nvfp4", 128, 72),
    # ggml block formats: q8_0 34 B / 32, q4_0 18 B / 32
    ("q8_0", 128, 136), ("q4_0", 128, 72), ("q5_1", 128, 96), ("iq4_nl", 64, 36),
])
def test_vector_bytes(name, elems, expected):
    assert KV_DTYPES[name].vector_bytes(elems) == expected


def test_fp8_ds_mla_is_656_bytes_per_latent():
    # 512 fp8 + 4 fp32 tile scales + 64 bf16 rope values (vLLM fp8_ds_mla)
    assert KV_DTYPES["fp8_ds_mla"].mla_latent_bytes(512, 64) == 656
    with pytest.raises(UsageError):
        KV_DTYPES["fp8_ds_mla"].vector_bytes(128)


def test_aliases_and_auto():
    assert resolve_kv_dtype("bf16", "float16").name == "bfloat16"
    assert resolve_kv_dtype("auto", "float16").name == "float16"
    assert resolve_kv_dtype("FP8", "bfloat16").name == "fp8"
    assert resolve_kv_dtype("nvfp4", "bfloat16").bits_per_element == 4.5


def test_unknown_dtype_names_the_value():
    with pytest.raises(UsageError, match="'int3'"):
        resolve_kv_dtype("int3", "bfloat16")
