"""One decode step of attention over the allocated cache, timed.

Per attention layer, one new query token per sequence attends to the tokens the layer holds:
- GQA / MQA / MHA by grouping: the ``heads / kv_heads`` query heads of one KV head are the query
  length of ``scaled_dot_product_attention`` (q ``[batch, kv_heads, group, head_dim]``), so K and V are
  read once, never expanded;
- MLA by absorbed latent attention: every query head attends to the one latent per token
  (``[batch, 1, heads, 576]`` against ``[batch, 1, tokens, 576]``, values the first ``kv_lora_rank``
  columns); transformers' split latent (keys ``[.., kv_lora_rank]``, rope ``[.., qk_rope]``) is scored
  as ``q_latent K^T + q_rope R^T``; 4.x expanded per-head K and V is plain multi-head attention.
vLLM's paged views are read in place (each sequence's blocks are consecutive). fp8 and
``*_per_token_head`` caches are dequantised to the model dtype per layer (that workspace is in the
peak). Recurrent layers are not stepped. Timed with CUDA events (``time.perf_counter`` on CPU) after
one warm-up step; the median of ``repeats`` steps is reported.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kvplan.record import dataclass
from kvplan.spec import MLA, KVAttention
from kvplan.verify.allocate import Allocation, import_torch
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import LayerInfo

_NO_DECODE = {"int4_per_token_head", "nvfp4", "fp8_ds_mla"}
MAX_REPEATS = 1000
"""Most timed steps: a median of 1,000 is as steady as it gets; more only runs longer (99,999,999 ran for hours)."""
SLOW_S = 2.0
"""Timed steps expected to take longer than this (the warm-up step x repeats) show a progress line on stderr
(a terminal only, as the Hub reader's)."""


def check_repeats(repeats: object) -> int:
    """``repeats`` as a whole number from 1 to ``MAX_REPEATS``, refused by field otherwise (before anything
    is allocated)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise VerifyError(f"{repeats!r} timed steps: give a whole number from 1 to {MAX_REPEATS:,}", field="repeats")
    return repeats


@dataclass(frozen=True)
class DecodeTiming:
    seconds: float
    """Median time of one step over all attention layers."""
    repeats: int
    read_bytes: int
    """Cache bytes one step reads."""
    peak_workspace_bytes: int | None
    """max_memory_allocated during the step beyond the cache (CUDA only)."""
    layers: int


def decode_step(alloc: Allocation, spec: Any, repeats: int = 5, tables: dict[int, Any] | None = None) -> DecodeTiming:
    """``tables``: layer -> int64 ``[sequences, blocks]`` block ids (a shared workload): each step
    gathers every sequence's blocks through its table, as a paged kernel reads them."""
    torch = import_torch()
    plan = alloc.plan
    if plan.kv_dtype in _NO_DECODE:
        raise VerifyError(f"the decode step reads bf16/fp16/fp32, fp8 and int8/fp8 per-token-head caches; "
                          f"'{plan.kv_dtype}' needs its engine's own kernels", field="decode")
    check_repeats(repeats)
    device = alloc.device
    compute = getattr(torch, plan.kv_dtype) if plan.kv_dtype in ("float32", "bfloat16", "float16") else \
        getattr(torch, spec.dtype)
    gen = torch.Generator(device="cpu").manual_seed(0)
    steps: list[Callable[[], Any]] = []
    read = 0
    steps_layers = [info for info in plan.layers if info.kind not in ("recurrent", "padding") and info.attend]
    for info in steps_layers:
        step, nbytes = _layer_step(torch, alloc, info, spec, compute, gen,
                                   None if tables is None else tables.get(info.index))
        steps.append(step)
        read += nbytes
    if not steps:
        raise VerifyError("the model has no attention layers to step", field="decode")

    def run() -> None:
        for step in steps:
            step()

    cuda = device.type == "cuda"
    t0 = time.perf_counter()
    run()  # warm-up (kernel selection, lazy init)
    if cuda:
        torch.cuda.synchronize(device)
    warm = time.perf_counter() - t0
    peak = None
    if cuda:
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        run()
        torch.cuda.synchronize(device)
        peak = int(torch.cuda.max_memory_allocated(device) - base)
    times: list[float] = []
    with _progress(warm * repeats > SLOW_S, repeats) as show:
        for i in range(repeats):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1000.0)
            else:
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            show(f"--decode: timed step {i + 1:,} of {repeats:,}, median so far "
                 f"{statistics.median(times) * 1e3:.3f} ms")
    steps.clear()
    return DecodeTiming(statistics.median(times), repeats, read, peak, len(steps_layers))


@contextmanager
def _progress(slow: bool, repeats: int) -> Iterator[Callable[[str], None]]:
    """A status line on stderr while slow steps run (only when stderr is a terminal: ``Progress``)."""
    if not slow:
        yield lambda _text: None
        return
    from kvplan.sources.hub.progress import Progress

    with Progress(f"--decode: {repeats:,} timed steps") as status:
        yield status.update


def _rand(torch: Any, shape: tuple[int, ...], dtype: Any, device: Any, gen: Any) -> Any:
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)


def _nbytes(*tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _dequant(torch: Any, data: Any, scale: Any | None, compute: Any) -> Any:
    if data.dtype == compute and scale is None:
        return data
    out = data.to(compute)
    if scale is not None:
        out = out * scale.unsqueeze(-1).to(compute)
    return out


def _layer_step(torch: Any, alloc: Allocation, info: LayerInfo, spec: Any, compute: Any,
                gen: Any, table: Any = None) -> tuple[Callable[[], Any], int]:
    F = torch.nn.functional
    views = alloc.views
    layer = info.layer
    batch = alloc.plan.batch
    device = alloc.device
    i = info.index
    if table is not None:
        return _paged_table_step(torch, alloc, info, spec, compute, gen, table.to(device))
    if isinstance(layer, MLA):
        assert layer.kv_lora_rank is not None and layer.qk_rope_head_dim is not None  # an MLA layer has both
        heads = layer.num_heads or spec.num_attention_heads or 1
        qk = (layer.qk_nope_head_dim or layer.kv_lora_rank) + layer.qk_rope_head_dim
        scale = 1.0 / math.sqrt(qk)
        rank = layer.kv_lora_rank
        if info.layout == "paged":
            latent = views[(i, "latent")]
            lat = latent.reshape(batch, -1, latent.shape[-1])[:, :info.attend].unsqueeze(1)  # [B,1,T,576]
            q = _rand(torch, (batch, 1, heads, lat.shape[-1]), compute, device, gen)

            def step() -> Any:
                kv = _dequant(torch, lat, None, compute)
                return F.scaled_dot_product_attention(q, kv, kv[..., :rank], scale=scale)

            return step, _nbytes(lat)
        k, v = views[(i, "K")], views[(i, "V")]
        batch = k.shape[0]  # transformers' rows: batch x samples (n or beams)
        if k.shape[1] == 1 and k.shape[-1] == rank:  # transformers 5.x: split latent
            q_lat = _rand(torch, (batch, 1, heads, rank), compute, device, gen)
            q_rope = _rand(torch, (batch, 1, heads, v.shape[-1]), compute, device, gen)

            def step() -> Any:
                scores = (q_lat @ k.transpose(-1, -2) + q_rope @ v.transpose(-1, -2)) * scale
                return torch.softmax(scores.float(), dim=-1).to(compute) @ k

            return step, _nbytes(k, v)
        q = _rand(torch, (batch, k.shape[1], 1, k.shape[-1]), compute, device, gen)  # 4.x expanded K/V

        def step() -> Any:
            return F.scaled_dot_product_attention(q, k, v)

        return step, _nbytes(k, v)

    assert isinstance(layer, KVAttention)  # the layers a step attends over: K/V attention or MLA
    kv_heads, head_dim = layer.kv_heads, layer.head_dim
    group = max(1, (spec.num_attention_heads or kv_heads) // kv_heads)
    k, v = views[(i, "K")], views[(i, "V")]
    if info.layout != "paged":
        batch = k.shape[0]  # transformers' rows: batch x samples (n or beams)
    ks, vs = views.get((i, "K scale")), views.get((i, "V scale"))
    if info.layout == "paged":  # [blocks, block, heads, d] -> [B, heads, tokens, d], in place
        def seq(t: Any) -> Any:
            flat = t.reshape(batch, -1, *t.shape[2:])[:, :info.attend]
            return flat.transpose(1, 2)

        k, v = seq(k), seq(v)
        ks = seq(ks) if ks is not None else None
        vs = seq(vs) if vs is not None else None
    q = _rand(torch, (batch, kv_heads, group, head_dim), compute, device, gen)
    nbytes = _nbytes(k, v, *(t for t in (ks, vs) if t is not None))

    def attend_step() -> Any:
        kk = _dequant(torch, k, ks, compute)
        vv = _dequant(torch, v, vs, compute)
        return F.scaled_dot_product_attention(q, kk, vv)

    return attend_step, nbytes


def _paged_table_step(torch: Any, alloc: Allocation, info: LayerInfo, spec: Any, compute: Any, gen: Any,
                      table: Any) -> tuple[Callable[[], Any], int]:
    """One layer's step through block tables: each sequence's blocks gathered (shared ones read by
    every sequence that references them, as vLLM's paged kernels do), then attention."""
    F = torch.nn.functional
    views, device, i, layer = alloc.views, alloc.device, info.index, info.layer
    seqs = table.shape[0]
    if isinstance(layer, MLA):
        assert layer.kv_lora_rank is not None and layer.qk_rope_head_dim is not None  # an MLA layer has both
        latent = views[(i, "latent")]
        heads = layer.num_heads or spec.num_attention_heads or 1
        scale = 1.0 / math.sqrt((layer.qk_nope_head_dim or layer.kv_lora_rank) + layer.qk_rope_head_dim)
        rank = layer.kv_lora_rank
        q = _rand(torch, (seqs, 1, heads, latent.shape[-1]), compute, device, gen)

        def mla_step() -> Any:
            kv = latent[table].reshape(seqs, -1, latent.shape[-1])[:, :info.attend].unsqueeze(1)
            kv = _dequant(torch, kv, None, compute)
            return F.scaled_dot_product_attention(q, kv, kv[..., :rank], scale=scale)

        return mla_step, seqs * info.attend * latent.shape[-1] * latent.element_size()
    assert isinstance(layer, KVAttention)  # the layers a step attends over: K/V attention or MLA
    kv_heads, head_dim = layer.kv_heads, layer.head_dim
    group = max(1, (spec.num_attention_heads or kv_heads) // kv_heads)
    planes = [views.get((i, role)) for role in ("K", "V", "K scale", "V scale")]

    def gather(t: Any) -> Any:
        return t[table].reshape(seqs, -1, *t.shape[2:])[:, :info.attend].transpose(1, 2)

    q = _rand(torch, (seqs, kv_heads, group, head_dim), compute, device, gen)
    per_token = sum(p[0, 0].numel() * p.element_size() for p in planes if p is not None)

    def step() -> Any:
        k, v, ks, vs = (gather(p) if p is not None else None for p in planes)
        return F.scaled_dot_product_attention(q, _dequant(torch, k, ks, compute), _dequant(torch, v, vs, compute))

    return step, seqs * info.attend * per_token
