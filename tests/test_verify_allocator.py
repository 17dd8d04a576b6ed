"""verify's model of torch's CUDA caching allocator (kvplan.verify.allocate.caching_allocator), no torch needed.

The first GPU run (NVIDIA H200, torch 2.11.0+cu130) found 19 points, all on sliding-window models, where
``memory_allocated`` grew by more than the tensors hold. verify's allocator model then counted only the 512 B
rounding and expected the prediction itself. The allocator hands a large block out whole when splitting it would
leave 1 MiB or less, and ``memory_allocated`` counts the whole block. The second run (docs/verification-gpu.md,
tests/data/verify_gpu_h200.json) recorded the same figures; the model has to give each one to the byte from verify's
own buffers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.sources.resolve import load_model
from kvplan.verify.allocate import (
    Measurement,
    allocator_notes,
    caching_allocator,
    rounded,
    segment_bytes,
)
from kvplan.verify.shapes import plan_cache, resolve_layout

MiB = 1 << 20


def test_a_large_block_is_split_only_when_more_than_1_mib_is_left():
    # 581 MiB (gemma-3-12b's vLLM buffers at batch 8 x 4k) takes a 582 MiB segment, handed out whole
    m = caching_allocator([581 * MiB])
    assert (m.allocated, m.reserved, m.rounded, m.unsplit) == (582 * MiB, 582 * MiB, 581 * MiB, ((581 * MiB, MiB),))
    # 1.375 MiB left over (72.625 MiB): split, the rest stays cached and free
    m = caching_allocator([72 * MiB + 640 * 1024])
    assert (m.allocated, m.reserved, m.unsplit) == (72 * MiB + 640 * 1024, 74 * MiB, ())
    # 16 KiB short of 64 MiB (a 4,095-token K or V tensor of Mistral at batch 8): counted as 64 MiB
    assert caching_allocator([64 * MiB - 16384] * 3).allocated == 3 * 64 * MiB
    # exactly 1 MiB + 512 B left: split
    assert caching_allocator([20 * MiB - MiB - 512]).allocated == 20 * MiB - MiB - 512


def test_medium_requests_share_20_mib_segments_and_the_last_fit_is_whole():
    # gemma-3-12b hf at batch 1: 4,190,208 B sliding K/V tensors, five to a 20 MiB segment; the fifth takes
    # the 4,210,688 B left, 20 KiB more than it asks, not split off
    m = caching_allocator([4_190_208] * 5)
    assert m.reserved == 20 * MiB and m.allocated == 20 * MiB and m.unsplit == ((4_190_208, 20_480),)
    # a later request takes a cached free block before a new segment (17 MiB free, 0.5 MiB left: whole)
    m = caching_allocator([3 * MiB, 16 * MiB + MiB // 2])
    assert (m.reserved, m.allocated, m.unsplit) == (20 * MiB, 20 * MiB, ((16 * MiB + MiB // 2, MiB // 2),))
    m = caching_allocator([3 * MiB, 12 * MiB])  # 5 MiB left: split
    assert (m.reserved, m.allocated, m.unsplit) == (20 * MiB, 15 * MiB, ())


def test_small_requests_split_down_to_512_bytes_and_empty_requests_take_nothing():
    m = caching_allocator([0, 1000, 1000, MiB])
    assert (m.allocated, m.reserved, m.unsplit) == (1024 + 1024 + MiB, 2 * MiB, ())
    assert segment_bytes([1000] * 3000) == 2 * (2 * MiB)  # 2,048 blocks of 1 KiB fill a segment
    # over 10 MiB: a segment of the request rounded to 2 MiB; 2 MiB - 512 B left is split, 1 MiB - 512 B is not
    assert caching_allocator([10 * MiB + 512]).allocated == 10 * MiB + 512
    assert caching_allocator([11 * MiB + 512]).allocated == 12 * MiB


def _measurement(allocated: int, expected: int, storage: int, unsplit: int) -> Measurement:
    return Measurement(storage_bytes=storage, allocated_bytes=allocated, reserved_bytes=allocated, driver_bytes=None,
                       peak_allocated_bytes=None, component_bytes={}, allocator_bytes=expected,
                       segment_bytes=allocated, rounded_bytes=storage, unsplit_blocks=unsplit)


def test_the_notes_say_whose_the_excess_is(monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    p = 8_623_489_024
    (note,) = allocator_notes(_measurement(p + 32 * MiB, p + 32 * MiB, p, 32), p, 32)
    assert "+33,554,432 B" in note and "32 of the 32 buffers" in note
    # the model disagrees with the device: said, with the difference, never folded into the prediction
    (note,) = allocator_notes(_measurement(p + 32 * MiB, p, p, 0), p, 32)
    assert "+33,554,432 B" in note and "allocator model" in note
    assert allocator_notes(_measurement(p, p, p, 0), p, 32) == []
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    notes = allocator_notes(_measurement(p, p, p, 0), p, 32)
    assert len(notes) == 1 and "expandable_segments:True" in notes[0]


@pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None, reason="torch not installed")
def test_the_report_shows_the_blocks_handed_out_whole():
    import dataclasses
    import io

    from rich.console import Console

    from kvplan.render.verify_out import print_verify
    from kvplan.verify import verify

    r = verify("openai-community/gpt2", batch=1, context=64, device="cpu", engine="hf")
    data = r.to_dict()["allocator"]
    assert data["rounded_bytes"] == data["expected_allocated_bytes"] == r.predicted_bytes  # CPU: no blocks
    assert data["unsplit_blocks"] == data["unsplit_bytes"] == 0
    # as on a GPU where 3 buffers were handed out whole: the line says how many and how much
    p = r.predicted_bytes
    gpu = dataclasses.replace(r, device="cuda:0", allocated_bytes=p + 3 * 4096, reserved_bytes=p + 3 * 4096,
                              allocator_bytes=p + 3 * 4096, allocator_rounded_bytes=p, unsplit_blocks=3)
    out = io.StringIO()
    print_verify(Console(file=out, width=300), gpu)
    assert "3 handed out as whole segments (+12,288" in out.getvalue()
    assert gpu.to_dict()["allocator"]["unsplit_bytes"] == 12_288


# The second H200 run (after the allocator model): all 124 points the GPU held, each with the growth of
# memory_allocated and memory_reserved to the byte. The first run (19 points over the prediction, the rest exact)
# gave the same figures; the model was written from its 19 points and the allocator's code, so these rows, the
# first run's included, check it.
_RERUN = json.loads((Path(__file__).parent / "data" / "verify_gpu_h200.json").read_text())
RERUN_ROWS = [tuple(r[:8]) for r in _RERUN["rows"]]


def test_the_rerun_holds_every_point_the_gpu_held():
    assert len(RERUN_ROWS) == 124  # 7 models x 18 points, less the 2 the GPU could not hold
    assert sum(r[6] != r[5] for r in RERUN_ROWS) == 19  # as many points allocated more than the tensors hold


@pytest.mark.parametrize("model,engine,dtype,batch,context,predicted,allocated,reserved", RERUN_ROWS,
                         ids=[f"{r[0].split('/')[1]}-{r[1]}-{r[2]}-{r[3]}x{r[4]}" for r in RERUN_ROWS])
def test_the_allocator_model_gives_every_figure_of_the_gpu_rerun(model, engine, dtype, batch, context, predicted,
                                                                 allocated, reserved):
    spec = load_model(model)
    plan = plan_cache(spec, resolve_layout(spec, engine, None, dtype, None), batch, context)
    sizes = [b.nbytes for b in plan.buffers]
    assert plan.predicted_bytes == sum(sizes) == predicted
    m = caching_allocator(sizes)
    assert (m.allocated, m.reserved) == (allocated, reserved)
    assert m.unsplit_bytes == allocated - sum(rounded(n) for n in sizes)  # the excess: blocks handed out whole
    assert bool(m.unsplit) == (allocated != predicted)
