"""Every bundled model through every engine: a number or a clear refusal, never a crash."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.errors import UsageError
from kvplan.sources.bundled import bundled_ids, load_bundled

ENGINES = {"vllm": ["auto", "fp8"], "sglang": ["auto", "fp8_e4m3"], "trtllm": ["auto", "fp8"],
           "llamacpp": ["auto", "q8_0"], "hf": ["auto"], "hf-static": ["auto"]}


@pytest.mark.parametrize("model_id", bundled_ids())
def test_every_engine_gives_a_number(model_id):
    spec = load_bundled(model_id)
    for engine, dtypes in ENGINES.items():
        result = kvplan.estimate(spec, contexts=[1000, 32768], batches=[1, 3], kv_dtypes=dtypes, engine=engine)
        for row in result.rows:
            assert row.kv_bytes > 0, (engine, row)
        small, large = result.rows[0], result.rows[2]  # batch 1 at 1000 and at 32768 tokens
        assert small.context == 1000 and large.context == 32768
        assert large.kv_bytes >= small.kv_bytes or spec.layer_kind_counts().get("chunked")


def test_vllm_refuses_head_quantisation_for_the_mla_latent():
    with pytest.raises(UsageError, match="MLA"):
        kvplan.estimate("deepseek-ai/DeepSeek-V3", kv_dtypes=["int8_per_token_head"])
