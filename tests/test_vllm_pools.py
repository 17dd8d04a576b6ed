"""vLLM's hybrid KV-cache pools: page-size unification and padding slots, in estimate, max-batch and verify.

Rules (vllm/v1/core/kv_cache_utils.py): ``unify_kv_cache_spec_page_size`` makes every page the largest
(smaller attention pages that divide it get proportionally larger blocks; others keep their block and
pad the page), then ``_get_kv_cache_groups_uniform_page_size`` cuts each spec type's layers into
groups of ``group_size`` slots; slots a type cannot fill are allocated all the same.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.engines.vllm.admission import vllm_pool
from kvplan.dtypes import resolve_kv_dtype
from kvplan.engines import EngineOptions, get_engine, parse_version
from kvplan.engines.vllm.pool import pool_grouping
from kvplan.spec import LayerSpec, ModelSpec, group_layers
from kvplan.verify.shapes import plan_cache


def _layout(spec: ModelSpec, **options: int):
    return get_engine("vllm").layout(spec, resolve_kv_dtype("auto", spec.dtype), parse_version("0.33"),
                                     EngineOptions(**options))


def _hybrid(n: int, period: int, window: int, local: tuple[int, int], glob: tuple[int, int]) -> ModelSpec:
    """Every ``period``-th layer global with (kv heads, head dim) ``glob``, the rest sliding with ``local``."""
    layers = []
    for i in range(n):
        if i % period == period - 1:
            layers.append(LayerSpec(kind="full", kv_heads=glob[0], head_dim=glob[1]))
        else:
            layers.append(LayerSpec(kind="sliding", kv_heads=local[0], head_dim=local[1], window=window))
    return ModelSpec(id="test/hybrid", model_type="test", layers=group_layers(layers))


def test_gemma_3_27b_padding_slots_are_counted():
    # 52 sliding + 10 full: group_size 10 (52 >= 1.5 x 10), ceil(52 / 10) = 6 sliding groups = 60 slots
    layout = _layout(kvplan.load_model("google/gemma-3-27b-it"))
    pads = [g for g in layout.groups if g.padding]
    assert [(g.kind, g.count, g.first_layer) for g in pads] == [("sliding", 8, 62)]
    # 2k context, batch 1, synchronous scheduling: 52 + 8 slots x 1,024 tokens + 10 x 2,048 tokens,
    # 8,192 B per token each; async (the default): the sliding slots hold one block more
    row = kvplan.estimate("google/gemma-3-27b-it", contexts=[2048], by_layer=True, async_scheduling=False).rows[0]
    assert row.kv_bytes == (60 * 1024 + 10 * 2048) * 8192 == 671_088_640
    row = kvplan.estimate("google/gemma-3-27b-it", contexts=[2048], by_layer=True).rows[0]
    assert row.kv_bytes == (60 * 1040 + 10 * 2048) * 8192
    assert sum(layer.bytes for layer in row.layers) == row.kv_bytes
    assert [layer.index for layer in row.layers if layer.kind == "padding"] == list(range(62, 70))
    # the pool spends one page in all 10 slots per block: what the padded layout sums, block for block
    pool = vllm_pool(layout)
    assert pool.padding_layers == 8 and pool.bytes_per_block == 10 * 16 * 8192


def test_hf_has_no_padding_and_single_type_models_none():
    assert not any(g.padding for g in get_engine("hf").layout(
        kvplan.load_model("google/gemma-3-27b-it"), resolve_kv_dtype("auto", "bfloat16"), parse_version("5.0"),
        EngineOptions()).groups)
    for model in ("meta-llama/Llama-3.1-8B", "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-V2-Lite"):
        assert not any(g.padding for g in _layout(kvplan.load_model(model)).groups), model


def test_smaller_pages_that_divide_get_larger_blocks():
    # sliding 16 x (256 + 256) x 2 B = 16,384 B/token; full 4 x (512 + 512) x 2 B = 8,192 B/token:
    # at 16 tokens the full page is half the sliding page, so full layers get blocks of 32
    spec = _hybrid(12, 6, 1024, (16, 256), (4, 512))
    layout = _layout(spec)
    blocks = {g.kind: g.block_size for g in layout.groups}
    assert blocks == {"sliding": 16, "full": 32}
    assert any("unifies page sizes to 262,144 B" in a for a in layout.assumptions)
    # 10 sliding + 2 full: group_size 2, 5 sliding groups, 1 full group, no padding
    grouping = pool_grouping(layout.groups)
    assert grouping.group_size == 2 and grouping.groups_per_type == (5, 1) and sum(grouping.padding_per_type) == 0
    # context 100: full layers hold ceil(100 / 32) x 32 = 128 tokens, sliding ceil(100 / 16) x 16 = 112
    assert layout.total_bytes(100, 1) == 10 * 112 * 16_384 + 2 * 128 * 8_192
    plan = plan_cache(spec, layout, 3, 100)
    assert plan.buffer_bytes == plan.predicted_bytes == layout.total_bytes(100, 3)
    # admission: a full group needs ceil(len / 32) blocks
    pool = vllm_pool(layout)
    assert {t.kind: t.block_size for t in pool.types} == {"sliding": 16, "full": 32}
    assert pool.blocks_per_request(4096, 0) == 5 * (-(-1023 // 16) + 1) + 1 * (4096 // 32)


def test_pages_that_do_not_divide_are_padded():
    # full 3 x (512 + 512) x 2 B = 6,144 B/token: 98,304 B pages do not divide 262,144 B, so the page is
    # padded to 262,144 B = 16,384 B per token of its 16-token blocks
    spec = _hybrid(12, 6, 1024, (16, 256), (3, 512))
    layout = _layout(spec)
    full = [g for g in layout.groups if g.kind == "full"]
    assert {g.block_size for g in full} == {16} and {g.token.bytes for g in full} == {16_384}
    assert any("pads smaller pages to 262,144 B" in a for a in layout.assumptions)
    plan = plan_cache(spec, layout, 2, 3000)
    assert plan.buffer_bytes == plan.predicted_bytes
    roles = {view.role for buf in plan.buffers for view in buf.views if view.layer == 5}
    assert roles == {"K", "V", "page padding"}


def test_uniform_type_with_different_sizes_is_one_group():
    # every layer full attention, two sizes: UniformTypeKVCacheSpecs, one group, no unification
    layers = [LayerSpec(kind="full", kv_heads=8, head_dim=128)] * 3 + [LayerSpec(kind="full", kv_heads=2, head_dim=128)]
    spec = ModelSpec(id="test/uniform", model_type="test", layers=group_layers(layers))
    layout = _layout(spec)
    assert not any(g.padding for g in layout.groups) and {g.block_size for g in layout.groups} == {16}
    pool = vllm_pool(layout)
    assert pool.num_groups == 1 and pool.bytes_per_block == 16 * (3 * 4096 + 1024)
    plan = plan_cache(spec, layout, 2, 50)
    assert plan.buffer_bytes == plan.predicted_bytes == layout.total_bytes(50, 2)


@settings(max_examples=60, deadline=None)
@given(n_sliding=st.integers(1, 40), n_full=st.integers(1, 12), window=st.sampled_from([128, 512, 4096]),
       heads=st.sampled_from([(8, 128), (4, 256), (2, 64)]), batch=st.integers(1, 4),
       context=st.integers(1, 20_000))
def test_planned_buffers_equal_estimate_for_any_hybrid(n_sliding, n_full, window, heads, batch, context):
    layers = [LayerSpec(kind="sliding", kv_heads=8, head_dim=128, window=window)] * n_sliding + \
        [LayerSpec(kind="full", kv_heads=heads[0], head_dim=heads[1])] * n_full
    spec = ModelSpec(id="test/any", model_type="test", layers=group_layers(layers))
    layout = _layout(spec)
    plan = plan_cache(spec, layout, batch, context)
    assert plan.buffer_bytes == plan.predicted_bytes == layout.total_bytes(context, batch)
    grouping = pool_grouping(layout.groups)
    assert plan.padding_layers == sum(grouping.padding_per_type)
    # slots = groups x group_size: every slot is a layer or a padding slot
    assert sum(grouping.groups_per_type) * grouping.group_size == n_sliding + n_full + plan.padding_layers


def test_max_batch_blocks_cost_every_slot():
    # 20 GiB of KV: blocks of 10 slots x 16 tokens x 8,192 B; a 2,048-token request is admitted with
    # 6 sliding groups x (ceil(min(1023 + 2 x 8192 in flight, 2048) / 16) + 1) + 1 full group x 128 blocks
    gib = 2**30
    plan = kvplan.max_batch("google/gemma-3-27b-it", gpu="H100-80GB", max_model_len=2048,
                            settings=kvplan.Settings(kv_cache_memory_bytes=20 * gib))
    blocks = 20 * gib // (10 * 16 * 8192)
    assert plan.num_blocks == blocks
    assert plan.max_concurrency == pytest.approx(blocks / (6 * 129 + 128))


def _vllm_stages_by_hand(spec: ModelSpec, pp: int, page: int) -> list[tuple[int, int]]:
    """(bytes per pool block, padding slots) per stage, simulated from vLLM's description: groups of the
    whole model (each type's layers strided over its groups), projected on each stage's layers."""
    from kvplan.parallel import pp_partitions

    kinds: dict[tuple, list[int]] = {}
    for i, layer in enumerate(spec.expanded_layers()):
        if layer.kind not in ("shared", "none"):
            kinds.setdefault((layer.kind, getattr(layer, "window", None)), []).append(i)
    counts = [len(v) for v in kinds.values()]
    size = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
    groups = [layers[k::-(-len(layers) // size)] for layers in kinds.values() for k in range(-(-len(layers) // size))]
    out, start = [], 0
    for n in pp_partitions(spec.num_layers, pp):
        projected = [sum(1 for i in g if start <= i < start + n) for g in groups]
        width = max(projected)
        out.append((width * page, sum(width - p for p in projected)))
        start += n
    return out


@pytest.mark.parametrize("model", ["google/gemma-3-27b-it", "google/gemma-3-1b-it", "openai/gpt-oss-20b",
                                   "google/gemma-3-12b-it"])
@pytest.mark.parametrize("pp", [2, 3, 4])
def test_pipeline_stages_project_the_whole_models_groups(model, pp):
    from kvplan.engines.vllm import VLLM
    from kvplan.parallel import pp_partitions

    spec = kvplan.load_model(model)
    dtype = resolve_kv_dtype("auto", spec.dtype)
    stages = VLLM.stage_layouts(spec, dtype, parse_version("0.33"), EngineOptions(), pp)
    page = max(g.token.bytes for g in stages[0].groups) * 16
    got = [(vllm_pool(s).bytes_per_block, vllm_pool(s).padding_layers) for s in stages]
    assert got == _vllm_stages_by_hand(spec, pp, page)
    # every stage keeps all of the whole model's groups, so a request needs the same blocks on each
    whole = vllm_pool(_layout(spec))
    assert {vllm_pool(s).blocks_per_request(4096, 16384) for s in stages} == {whole.blocks_per_request(4096, 16384)}
    # and the stage's layers are exactly its share of the model
    assert sum(g.count for s in stages for g in s.groups if not g.padding) == spec.num_layers


def test_gemma_3_27b_on_four_stages():
    # 62 layers on PP4: 15, 16, 16, 15 (vllm get_pp_indices). Stage 0 (layers 0-14) has 13 sliding and 2
    # full layers; the model's 6 sliding groups (sliding layers strided by 6) and 1 full group keep
    # 3, 2, 2, 2, 2, 2 and 2 of them: 3 slots per block, 7 x 3 - 15 = 6 of them padding.
    plan = kvplan.max_batch("google/gemma-3-27b-it", gpu="H100-80GB", max_model_len=2048, pp=4,
                            settings=kvplan.Settings(kv_cache_memory_bytes=2**30))
    assert plan.num_blocks == 2**30 // (3 * 16 * 8192)
