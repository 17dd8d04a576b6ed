"""SGLang's split of a hybrid model's pool between Mamba / GDN state slots and full-attention tokens.

Hand-computed from the released wheels: ``handle_max_mamba_cache`` (0.5.10
``model_executor/model_runner_kv_cache_mixin.py``; 0.5.17 ``mem_cache/kv_cache_configurator.py``),
``_resolve_max_num_reqs``, 0.5.3 ``model_runner.py`` ``ModelRunner.__init__``; ``mamba_cache_per_req`` from
``configs/mamba_utils.py``.
"""

from __future__ import annotations

from typing import Any

from conftest import DATA
from hypothesis import given
from hypothesis import strategies as st

from kvplan.budgets.base import Settings
from kvplan.engines.sglang import mamba
from kvplan.plan import CapacityPlan, max_batch

QWEN35_9B = str(DATA / "hf_configs_transcribed" / "Qwen__Qwen3.5-9B.json")
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
MIB = 1 << 20

# Qwen3.5-9B at tp 2, per rank: 24 GDN layers of conv (2 x 16 + 32) x 128 / 2 = 4,096 channels x 3 columns x 2 B
# and a state of 32 / 2 = 16 heads x 128 x 128 x 4 B (float32); 8 full-attention layers of 4 / 2 KV heads x
# (256 + 256) x 2 B.
QWEN35_PER_REQ = 24 * (4096 * 3 * 2 + 16 * 128 * 128 * 4)  # 25,755,648 B = 24.5625 MiB
QWEN35_CELL = 8 * 2 * 512 * 2  # 16,384 B per token (the log: K 2.50 GB / 327,310 tokens = 8,192 B)
# The log (tests/data/engine_logs_issue21f.yaml, sglang-qwen35-9b-hybrid-tp2-2x4090-mfs080): 186 slots, 327,310
# tokens. SGLang's rest that gives both: 186 slots' state + 327,310 cells + less than one cell.
QWEN35_REST = 186 * QWEN35_PER_REQ + 327_310 * QWEN35_CELL + 8_192


def _plan(model: str, kv: int, version: str, tp: int, **kw: Any) -> CapacityPlan:
    return max_batch(model, gpu="RTX-4090" if tp == 2 else "H100", tp=tp, engine="sglang", engine_version=version,
                     max_model_len=262144, settings=Settings(kv_cache_memory_bytes=kv), **kw)


def test_qwen35_9b_log_slots_tokens_and_running_requests():
    assert QWEN35_PER_REQ == 25_755_648
    # the state share: rest x 0.9 / 1.9 = 4.4796 GiB; // 24.5625 MiB = 186 (not 187: 187 x 24.5625 MiB is 4.4856)
    assert int(QWEN35_REST / (1 << 30) * 0.9 / 1.9 * (1 << 30) // QWEN35_PER_REQ) == 186
    plan = _plan(QWEN35_9B, QWEN35_REST, "0.5.10", 2, context=1024)
    assert plan.state_slots == 186
    assert plan.kv_cache_tokens == 327_310  # logged max_total_num_tokens
    assert plan.max_batch == 62  # logged max_running_requests: 186 // 3 (token-wise, 319 of 1,024 would fit)
    assert plan.to_dict()["mamba_cache_slots"] == 186
    # the log's sizes: MambaPool allocates one row more than the slots (size + 1)
    assert round(187 * 24 * 4096 * 3 * 2 / (1 << 30), 2) == 0.10  # conv_state size: 0.10GB
    assert round(187 * 24 * MIB / (1 << 30), 2) == 4.38  # ssm_state size: 4.38GB
    assert round(327_310 * QWEN35_CELL / 2 / (1 << 30), 2) == 2.50  # K size: 2.50 GB


def test_qwen35_9b_long_requests_are_token_bound():
    plan = _plan(QWEN35_9B, QWEN35_REST, "0.5.10", 2)
    assert plan.max_batch == 327_310 // 262_144 == 1
    assert plan.state_slots == 186


# Qwen3-Next-80B-A3B at tp 1: 36 GDN layers of conv (2 x 16 + 32) x 128 = 8,192 x 3 x 2 B and 32 x 128 x 128 x 4 B;
# 12 full-attention layers of 2 KV heads x 512 x 2 B.
NEXT_PER_REQ = 36 * (8192 * 3 * 2 + 32 * 128 * 128 * 4)  # 77,266,944 B
NEXT_CELL = 12 * 2 * 512 * 2  # 24,576 B
NEXT_REST = 40 << 30


def test_qwen3_next_by_release():
    # 0.5.4 - 0.5.16: 40 GiB x 0.9 / 1.9 = 20,344,613,356 B // 77,266,944 = 263 slots; the tokens get
    # 42,949,672,960 - 263 x 77,266,944 = 22,628,466,688 B // 24,576 = 920,754
    assert NEXT_PER_REQ == 77_266_944
    plan = _plan(QWEN3_NEXT, NEXT_REST, "0.5.10", 1, context=1024)
    assert (plan.state_slots, plan.kv_cache_tokens, plan.max_batch) == (263, 920_754, 263 // 3)
    # 0.5.17: the padding row comes out of the share: (share - per_req) // per_req = 262 slots, 263 rows paid
    plan = _plan(QWEN3_NEXT, NEXT_REST, "0.5.17", 1, context=1024)
    assert (plan.state_slots, plan.kv_cache_tokens, plan.max_batch) == (262, 920_754, 262 // 3)
    # 0.5.3: 512 slots whatever the memory: (42,949,672,960 - 512 x 77,266,944) // 24,576 = 137,898 tokens
    plan = _plan(QWEN3_NEXT, NEXT_REST, "0.5.3", 1, context=1024)
    assert (plan.state_slots, plan.kv_cache_tokens) == (512, 137_898)
    assert plan.max_batch == 134  # token-bound: 137,898 // 1,024


def test_a_model_without_recurrent_layers_has_no_slots():
    plan = max_batch("Qwen/Qwen3-8B", gpu="H100", engine="sglang", max_model_len=32768)
    assert plan.state_slots is None and "mamba_cache_slots" not in plan.to_dict()


@given(kv=st.integers(0, 1 << 40), per_request=st.integers(1, 1 << 30),
       version=st.sampled_from([(0, 5, 3), (0, 5, 10), (0, 5, 17)]), given_reqs=st.one_of(st.none(), st.integers(1, 64)))
def test_the_split_never_takes_more_than_the_pool_for_its_tokens(kv: int, per_request: int,
                                                                 version: tuple[int, int, int],
                                                                 given_reqs: int | None) -> None:
    cut = mamba.split(kv, per_request, version, given_reqs)
    assert cut.slots * per_request <= cut.state_bytes
    assert 0 <= cut.token_bytes <= max(0, kv - cut.state_bytes) + 1  # one byte of float rounding at most
    if version >= mamba.RATIO_SINCE and cut.slots:  # the ratio rule sizes the state inside the pool (no slot:
        assert cut.state_bytes + cut.token_bytes <= kv + 1  # SGLang refuses to start, and kvplan does not fit)
        assert cut.max_running_requests == cut.slots // 3


QWEN35_LOG = """\
[2026-04-14 16:08:44 TP0] Load weight begin. avail mem=22.93 GB
[2026-04-14 16:08:49 TP0] Load weight end. elapsed=5.54 s, type=Qwen3_5ForConditionalGeneration, avail mem=14.08 GB, mem usage=8.85 GB.
[2026-04-14 16:08:49 TP0] Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB, ssm_state size: 4.38GB
[2026-04-14 16:08:49 TP0] KV Cache is allocated. #tokens: 327310, K size: 2.50 GB, V size: 2.50 GB
[2026-04-14 16:08:49 TP0] Memory pool end. avail mem=4.49 GB
"""


def test_log_comparison_shows_the_logged_and_planned_slots():
    import io

    from kvplan.logs import parse_log
    from kvplan.logs.compare import rows
    from kvplan.record import replace

    log = parse_log(io.BytesIO(QWEN35_LOG.encode()))
    if "mamba_cache_slots" not in log.counts:  # the reader of this branch may not read the Mamba line yet
        log = replace(log, counts={**log.counts, "mamba_cache_slots": 186})
    plan = _plan(QWEN35_9B, QWEN35_REST, "0.5.10", 2)
    row = next(r for r in rows(log, plan) if r.item == "mamba_cache_slots")
    assert (row.logged, row.kvplan, row.difference) == (186, 186, 0)
    tokens = next(r for r in rows(log, plan) if r.item == "kv_cache_tokens")
    assert (tokens.logged, tokens.kvplan) == (327_310, 327_310)
    # a log without the count gets no row (a dense model's waterfall is unchanged)
    bare = replace(log, counts={k: v for k, v in log.counts.items() if k != "mamba_cache_slots"})
    assert all(r.item != "mamba_cache_slots" for r in rows(bare, plan))


# Two more logs whose models kvplan does not load, checked on the split alone: each log's slots and tokens come
# out of one rest (a window of less than one cell), so the 0.9 ratio rule is what sized them.
def test_lfm2_700m_log_0_5_6_is_one_rest_under_the_ratio_rule():
    # LiquidAI/LFM2-700M (sglang-lfm2-700m-hybrid-16gb-bench-one-batch-v056post2): 10 short-conv layers of
    # 1,536 channels x 2 columns x 2 B, no SSM state; 6 attention layers of 8 KV heads x 128 x 2 B
    per_req, cell = 10 * 1536 * 2 * 2, 6 * 8 * 128 * 2
    assert round(85_292 * per_req / (1 << 30), 2) == 4.88  # conv_state size: 4.88GB
    cut = mamba.split(85_292 * per_req + 473_854 * cell + 4_000, per_req, (0, 5, 6), None)
    assert (cut.slots, cut.token_bytes // cell) == (85_292, 473_854)


def test_granite_4_h_micro_log_is_one_rest_under_the_ratio_rule():
    # ibm-granite/granite-4.0-h-micro (sglang-pr18040-granite4-h-micro-hybrid-16gb, Jan 2026): 36 Mamba-2
    # layers of conv (4,096 + 2 x 128) x 3 x 2 B and 64 x 64 x 128 x 4 B; 4 attention layers of 8 x 128 x 2 B
    per_req, cell = 36 * (4352 * 3 * 2 + 64 * 64 * 128 * 4), 4 * 8 * 128 * 2
    assert round(39 * 36 * 64 * 64 * 128 * 4 / (1 << 30), 2) == 2.74  # ssm_state size (39 rows): 2.74GB
    cut = mamba.split(38 * per_req + 399_740 * cell + 4_000, per_req, (0, 5, 8), None)
    assert (cut.slots, cut.token_bytes // cell) == (38, 399_740)
