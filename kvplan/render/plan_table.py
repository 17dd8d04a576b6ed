"""Rich rendering of a capacity plan (``kvplan max-batch``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kvplan.plan import CapacityPlan
from kvplan.render.common import interval_note, ranged
from kvplan.render.console import never_cut
from kvplan.units import format_bytes


def print_plan(console: Console, plan: CapacityPlan) -> None:
    par = f"tp {plan.tp} x pp {plan.pp} x dp {plan.dp}"
    if plan.ep > plan.tp:  # the routed experts spread over the data-parallel ranks too
        par += f", experts over ep {plan.ep}"
    title = (f"{plan.model_id} on {plan.gpu_count} x {plan.gpu_name} ({par}), {plan.engine} {plan.engine_version}, "
             f"KV {plan.kv_dtype}")
    mem = Table(title=f"{title}\nOne GPU: {format_bytes(plan.gpu_total_bytes)} ({plan.gpu_total_bytes:,} B)",
                title_justify="left")
    for name, justify in (("memory", "left"), ("size", "right"), ("bytes", "right"), ("how", "left"), ("why", "left")):
        mem.add_column(name, justify=justify)  # type: ignore[arg-type]
    for item in plan.items:
        mem.add_row(item.name, format_bytes(item.bytes), f"{item.bytes:,}", item.tag, item.note)
    console.print(never_cut(mem))
    res = Table(show_header=False, title="Capacity", title_justify="left")
    res.add_column("what")
    res.add_column("value", justify="right")
    if plan.block_size:
        res.add_row("block size (tokens)", f"{plan.block_size:,}")
    if plan.num_blocks is not None:
        res.add_row("KV blocks per GPU", f"{plan.num_blocks:,}")
    res.add_row("KV cache tokens (as the engine logs them)",
                ranged(plan, "kv_cache_tokens", f"{plan.kv_cache_tokens:,}"))
    res.add_row(f"max concurrency at {plan.max_model_len:,} tokens",
                ranged(plan, "max_concurrency", f"{plan.max_concurrency:.2f}x", lambda v: f"{v:.2f}x"))
    if plan.max_batch_plain is not None:
        what = f"requests of {plan.samples} x " if plan.samples > 1 else ""
        shared = f", {plan.shared_prefix:,} shared" if plan.shared_prefix else ""
        res.add_row(f"max batch at {what}{plan.context:,} tokens{shared}", f"{plan.max_batch:,}")
        res.add_row("  with nothing shared", f"{plan.max_batch_plain:,}")
    else:
        res.add_row(f"max batch at {plan.context:,} tokens", ranged(plan, "max_batch", f"{plan.max_batch:,}"))
    res.add_row(f"max context at batch {plan.batch}", f"{plan.max_context:,}")
    if plan.decode_step_seconds_min is not None:
        res.add_row("decode step, lower bound", f"{plan.decode_step_seconds_min * 1000:.2f} ms")
        res.add_row("decode tokens/s, upper bound", f"{plan.decode_tokens_per_second_max:,.0f}")
    res.add_row("fits", "yes" if plan.fits else "[bold red]no[/bold red]")
    console.print(never_cut(res))
    if plan.engine_defaults:
        shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in plan.engine_defaults.items())
        console.print(f"Engine settings used: {shown}", highlight=False, markup=False)
    if plan.assumptions or plan.interval:
        console.print("[bold]Assumptions[/bold]")
        for note in (*plan.assumptions, *([interval_note(plan)] if plan.interval else [])):
            console.print(f"  • {note}", highlight=False, markup=False)
