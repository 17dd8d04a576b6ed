"""The table of a capacity plan (``kvplan max-batch``): through rich in a terminal, written plainly when piped
(``render/grid.py``, the same bytes)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.render.common import interval_note, ranged
from kvplan.render.grid import Grid, GridOut
from kvplan.units import format_bytes

if TYPE_CHECKING:
    from kvplan.plan import CapacityPlan


def write_plan(out: GridOut, plan: CapacityPlan) -> None:
    par = f"tp {plan.tp} x pp {plan.pp} x dp {plan.dp}"
    if plan.ep > plan.tp:  # the routed experts spread over the data-parallel ranks too
        par += f", experts over ep {plan.ep}"
    title = (f"{plan.model_id} on {plan.gpu_count} x {plan.gpu_name} ({par}), {plan.engine} {plan.engine_version}, "
             f"KV {plan.kv_dtype}")
    out.grid(Grid(f"{title}\nOne GPU: {format_bytes(plan.gpu_total_bytes)} ({plan.gpu_total_bytes:,} B)",
                  (("memory", "left"), ("size", "right"), ("bytes", "right"), ("how", "left"), ("why", "left")),
                  tuple((item.name, format_bytes(item.bytes), f"{item.bytes:,}", item.tag, item.note)
                        for item in plan.items)))
    rows: list[tuple[str, str] | tuple[str, tuple[str, str]]] = []
    if plan.block_size:
        rows.append(("block size (tokens)", f"{plan.block_size:,}"))
    if plan.num_blocks is not None:
        rows.append(("KV blocks per GPU", f"{plan.num_blocks:,}"))
    rows.append(("KV cache tokens (as the engine logs them)",
                 ranged(plan, "kv_cache_tokens", f"{plan.kv_cache_tokens:,}")))
    if plan.state_slots is not None:  # SGLang sizes a hybrid's recurrent-state slots apart
        rows.append(("recurrent-state slots (max_mamba_cache_size)", f"{plan.state_slots:,}"))
    rows.append((f"max concurrency at {plan.max_model_len:,} tokens",
                 ranged(plan, "max_concurrency", f"{plan.max_concurrency:.2f}x", lambda v: f"{v:.2f}x")))
    if plan.max_batch_plain is not None:
        what = f"requests of {plan.samples} x " if plan.samples > 1 else ""
        shared = f", {plan.shared_prefix:,} shared" if plan.shared_prefix else ""
        rows.append((f"max batch at {what}{plan.context:,} tokens{shared}", f"{plan.max_batch:,}"))
        rows.append(("  with nothing shared", f"{plan.max_batch_plain:,}"))
    else:
        rows.append((f"max batch at {plan.context:,} tokens", ranged(plan, "max_batch", f"{plan.max_batch:,}")))
    rows.append((f"max context at batch {plan.batch}", f"{plan.max_context:,}"))
    if plan.decode_step_seconds_min is not None:
        rows.append(("decode step, lower bound", f"{plan.decode_step_seconds_min * 1000:.2f} ms"))
        rows.append(("decode tokens/s, upper bound", f"{plan.decode_tokens_per_second_max:,.0f}"))
    rows.append(("fits", "yes" if plan.fits else ("no", "[bold red]no[/bold red]")))
    out.grid(Grid("Capacity", (("what", "left"), ("value", "right")), tuple(rows), show_header=False))
    if plan.engine_defaults:
        shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in plan.engine_defaults.items())
        out.line(f"Engine settings used: {shown}")
    if plan.assumptions or plan.interval:
        out.line("Assumptions", bold=True)
        for note in (*plan.assumptions, *([interval_note(plan)] if plan.interval else [])):
            out.line(f"  • {note}")
