"""Every bundled model through every engine, one test per property, over the parametrization that
tests/conftest.py shares (``bundled_model`` x ``bundled_engine``): a positive estimate that grows with the
context, a verify plan whose tensors hold exactly what the estimate counts, and a plan for every tp x pp rank
(no torch: plans are arithmetic; the allocations are checked per engine in tests/test_verify*.py)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanError, UsageError
from kvplan.spec import ModelSpec
from kvplan.verify.errors import VerifyError
from kvplan.verify.ranks import RankPlan, plan_ranks
from kvplan.verify.shapes import plan_cache, resolve_layout
from conftest import bundled_spec_files, estimate_kv, load_bundled_file

# each engine's default cache dtype and a 1-byte one
DTYPES = {"vllm": ["auto", "fp8"], "sglang": ["auto", "fp8_e4m3"], "trtllm": ["auto", "fp8"],
          "llamacpp": ["auto", "q8_0"], "hf": ["auto"], "hf-static": ["auto"]}
VERIFY_ENGINES = ("vllm", "sglang", "trtllm", "hf", "hf-static")
# Gemma 3 models whose vLLM hybrid groups are padded with unused layer slots (kvplan.capacity.vllm_pool)
PADDED = {"google/gemma-3-1b-it", "google/gemma-3-4b-it", "google/gemma-3-27b-it"}


def test_every_engine_gives_a_number_that_grows_with_the_context(bundled_spec: ModelSpec, bundled_engine: str):
    result = kvplan.estimate(bundled_spec, contexts=[1000, 32768], batches=[1, 3], kv_dtypes=DTYPES[bundled_engine],
                             engine=bundled_engine)
    for row in result.rows:
        assert row.kv_bytes > 0, row
    small, large = result.rows[0], result.rows[2]  # batch 1 at 1000 and at 32768 tokens
    assert small.context == 1000 and large.context == 32768
    # a chunked layer drops its finished chunk: only there may a longer context hold less
    assert large.kv_bytes >= small.kv_bytes or bundled_spec.layer_kind_counts().get("chunked")


def test_vllm_refuses_head_quantisation_for_the_mla_latent():
    with pytest.raises(UsageError, match="MLA"):
        kvplan.estimate("deepseek-ai/DeepSeek-V3", kv_dtypes=["int8_per_token_head"])


@pytest.mark.engines(*VERIFY_ENGINES)
def test_planned_tensors_hold_the_estimate(bundled_spec: ModelSpec, bundled_engine: str):
    spec, engine = bundled_spec, bundled_engine
    try:
        layout = resolve_layout(spec, engine, None, "auto", None)
    except VerifyError as e:
        # a cache SGLang's or TensorRT-LLM's verify does not lay out is refused by field (tested per engine);
        # vLLM's and transformers' lay out every bundled model
        assert engine in ("sglang", "trtllm") and e.field, (spec.id, engine, e)
        return
    for batch, context in ((1, 1), (3, 5000)):
        plan = plan_cache(spec, layout, batch, context)
        expected = estimate_kv(spec, batch, context, engine=engine)
        assert plan.predicted_bytes == expected, (spec.id, engine, batch, context)
        assert plan.buffer_bytes == expected, (spec.id, engine, batch, context)
        assert (plan.padding_layers > 0) == (engine == "vllm" and spec.id in PADDED)


# (engine, tp, pp, batch, context): the splits planned for every bundled model
RANKS = [("vllm", 2, 1, 3, 5000), ("vllm", 1, 2, 3, 5000), ("vllm", 4, 4, 3, 5000), ("vllm", 2, 3, 3, 5000),
         ("hf", 1, 2, 3, 5000), ("hf-static", 1, 3, 3, 5000),
         ("sglang", 2, 1, 2, 1000), ("sglang", 4, 2, 2, 1000), ("trtllm", 2, 1, 2, 1000), ("trtllm", 4, 2, 2, 1000)]
# what a refusal may name: heads that do not divide by tp; for vLLM and transformers also more stages than layers
REFUSABLE = {"vllm": ("tp", "pp"), "hf": ("tp", "pp"), "hf-static": ("tp", "pp"), "sglang": ("tp",), "trtllm": ("tp",)}


@functools.lru_cache(maxsize=None)
def _ranks(path: Path, engine: str, tp: int, pp: int, batch: int, context: int) -> tuple[RankPlan, ...] | KvplanError:
    """The plans of every rank, or the refusal (cached: the count test below reads what the others planned)."""
    try:  # plan_cache checks every rank's views against its share of the estimate
        return plan_ranks(load_bundled_file(path), tp=tp, pp=pp, batch=batch, context=context, engine=engine)
    except KvplanError as e:
        return e


@pytest.mark.parametrize("engine, tp, pp, batch, context", RANKS, ids=[f"{e}-tp{t}-pp{p}" for e, t, p, _, _ in RANKS])
def test_every_rank_plans_its_share(bundled_model: Path, engine: str, tp: int, pp: int, batch: int, context: int):
    plans = _ranks(bundled_model, engine, tp, pp, batch, context)
    if isinstance(plans, KvplanError):
        assert plans.field in REFUSABLE[engine], plans
        assert isinstance(plans, UsageError) or engine in ("vllm", "hf", "hf-static"), plans
        return
    assert len(plans) == tp * pp
    for rp in plans:
        assert rp.plan.buffer_bytes == rp.plan.predicted_bytes, rp.rank


def test_most_bundled_models_split_over_ranks():
    # refusals are for the few models whose heads or layers do not split: not a way out for all of them
    files = bundled_spec_files()
    planned = {case: [p for p in (_ranks(f, *case) for f in files) if not isinstance(p, KvplanError)] for case in RANKS}
    for case in RANKS:
        if case[0] in ("vllm", "hf", "hf-static"):
            assert len(planned[case]) > 40, case  # models planned
    for engine in ("sglang", "trtllm"):
        assert sum(len(plans) for case in RANKS if case[0] == engine for plans in planned[case]) > 100, engine  # ranks
