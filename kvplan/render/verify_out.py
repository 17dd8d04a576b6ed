"""``kvplan verify``'s table: the measured cache against the prediction, per component; the ranks of a
distributed run; the transformers forward of ``--activation``."""

from __future__ import annotations

from typing import Any

from rich.markup import escape


def _said(console: Any, text: str, style: str) -> None:
    """A line of data (a note, an error, a path), printed as it is: "[q x k]" is not a rich markup tag."""
    console.print(text, style=style, markup=False, highlight=False)


def print_activation(console: Any, a: Any) -> None:
    """The transformers forward: weights, cache against the hf rule, the activation peak against the estimate."""
    console.print(f"[bold]--activation[/bold]: transformers {a.transformers_version} forward of {a.batch} x "
                  f"{a.tokens:,} tokens on {a.device}, {a.dtype}, {a.attn_implementation} attention, random weights")
    if a.skipped:
        _said(console, a.skipped, "yellow")
    else:
        verdict = "[green]exact[/green]" if a.cache_exact else "[red]differs[/red]"
        console.print(f"weights {_b(a.weights_bytes)}; cache {_b(a.cache_bytes)} (storage kept alive "
                      f"{_b(a.cache_storage_bytes)}), kvplan hf rule {_b(a.predicted_cache_bytes)}: {verdict}")
        err = "" if a.activation_error_pct is None else f" ({a.activation_error_pct:+.1f} % vs measured)"
        console.print(f"activation peak: measured {_b(a.activation_bytes)}, kvplan estimates "
                      f"{_b(a.predicted_activation_bytes)}{err} = {a.predicted_formula}")
    for note in a.notes:
        _said(console, f"• {note}", "dim")


def print_ranks(console: Any, r: Any) -> None:
    """One table: per rank, each component's predicted and measured bytes, the rank's total, the sum."""
    from rich.table import Table

    blocks = f"  block {r.block_size}" if r.block_size else ""
    devices = sorted({k.device for k in r.ranks})
    console.print(f"[bold]{escape(r.model_id)}[/bold]  {r.engine} {r.engine_version}  kv {r.kv_dtype}{blocks}  batch {r.batch}"
                  f"  context {r.context:,}  tp {r.tp} x pp {r.pp} = {r.world_size} ranks on {', '.join(devices)}"
                  f" ({r.launcher}, {r.backend})")
    table = Table(show_header=True, header_style="bold")
    for col in ("rank", "tp,pp", "layers", "component", "n", "predicted B", "measured B", "error B"):
        text = col in ("component", "layers")
        table.add_column(col, justify="left" if text else "right", no_wrap=not text,
                         min_width={"component": 10, "layers": 5}.get(col))
    blank = ["", "", ""]
    for k in r.ranks:
        head = [str(k.rank), f"{k.tp_rank},{k.pp_rank}", f"{k.first_layer}-{k.first_layer + k.num_layers - 1}"]
        for c in k.components:
            measured = "-" if k.error else f"{c.measured_bytes:,}"
            error = "-" if k.error else f"{c.error_bytes:+,}"
            table.add_row(*head, c.name, str(c.layers), f"{c.predicted_bytes:,}", measured, error)
            head = blank
        if k.error:
            table.add_row(*head, "[red]rank total[/red]", "", f"{k.predicted_bytes:,}", "[red]-[/red]", "-",
                          end_section=True)
            continue
        diff = k.measured_storage_bytes - k.predicted_bytes
        table.add_row(*head, "[bold]rank total[/bold]", "", f"{k.predicted_bytes:,}", f"{k.measured_storage_bytes:,}",
                      f"{diff:+,}", end_section=True)
    total = r.measured_storage_bytes - r.predicted_bytes
    measured_sum, error_sum = ("-", "-") if r.errors else (f"{r.measured_storage_bytes:,}", f"{total:+,}")
    table.add_row("[bold]all[/bold]", "", "", "[bold]sum[/bold]", "", f"{r.predicted_bytes:,}", measured_sum,
                  error_sum)
    console.print(table)
    if r.sharing is not None:
        print_rank_sharing(console, r)
    if any(k.reserved_bytes is not None for k in r.ranks):
        for k in r.ranks:
            console.print(f"rank {k.rank} ({k.device_name}): memory_allocated Δ {_b(k.allocated_bytes)}, "
                          f"memory_reserved Δ {_b(k.reserved_bytes)}, driver Δ {_b(k.driver_bytes)}")
    for k in r.errors:
        _said(console, f"rank {k.rank}: {k.error}", "red")
    verdict = "[green]every rank exact[/green]" if r.exact else "[red]differs[/red]"
    freed = all(k.released for k in r.ranks)
    console.print(f"tensors vs prediction: {verdict}; everything freed: {'yes' if freed else '[red]no[/red]'}")
    for note in r.notes:
        _said(console, f"• {note}", "dim")


def print_rank_sharing(console: Any, r: Any) -> None:
    """The workload every rank allocated, and each rank's block tables against its prediction."""
    sh = r.sharing
    what = [f"prompt {sh['prompt_len']:,} + output {sh['output_len']:,}"]
    what += [f"{label} {sh[key]:,}" for key, label in (("shared_prefix", "shared prefix"), ("n", "n"),
                                                       ("beam_width", "beams")) if sh[key] > 1]
    if sh["speculative_method"]:
        what.append(f"{sh['speculative_method']}, +{sh['extra_slots']} slots per sequence")
    console.print(f"workload on every rank: {r.batch} request(s) = {sh['sequences']} sequence(s), {', '.join(what)}")
    for k in r.ranks:
        if k.referenced_bytes is not None:
            ok = "[green]=[/green]" if k.referenced_bytes == k.predicted_bytes else "[red]≠[/red]"
            console.print(f"  rank {k.rank}: block tables reference {_b(k.referenced_bytes)} {ok} predicted")


def _b(n: int | None) -> str:
    from kvplan.units import format_bytes

    return "-" if n is None else f"{n:,} ({format_bytes(n)})"


def _pct(error: int | None, base: int) -> str:
    if error is None or not base:
        return "-"
    return f"{100.0 * error / base:+.4f} %"


def print_sharing(console: Any, r: Any) -> None:
    """The workload allocated: the plain figure beside the prediction, each group's block tables."""
    sh = r.sharing
    what = [f"prompt {sh.prompt_len:,} + output {sh.output_len:,}"]
    if sh.shared_prefix:
        what.append(f"shared prefix {sh.shared_prefix:,}")
    if sh.n > 1:
        what.append(f"n {sh.n}")
    if sh.beam_width > 1:
        what.append(f"{sh.beam_width} beams")
    if sh.speculative_method:
        draft = f" ({sh.draft})" if sh.draft else ""
        what.append(f"{sh.speculative_method}{draft}, +{sh.extra_slots} slots per sequence")
    saving = r.predicted_bytes - sh.kv_bytes_plain
    pct = f" ({100.0 * saving / sh.kv_bytes_plain:+.1f} %)" if sh.kv_bytes_plain else ""
    console.print(f"workload: {r.batch} request(s) = {sh.sequences} sequence(s), {', '.join(what)}; "
                  f"predicted {_b(r.predicted_bytes)}, plain (nothing stored once) {_b(sh.kv_bytes_plain)}{pct}")
    if sh.referenced_bytes is not None:
        ok = "[green]=[/green]" if sh.referenced_bytes == r.predicted_bytes else "[red]≠[/red]"
        console.print(f"block tables reference {_b(sh.referenced_bytes)} of the pool {ok} predicted")
        for t in sh.block_tables:
            layers = f"layers {t.layers[0]}-{t.layers[-1]}" if len(t.layers) > 1 else f"layer {t.layers[0]}"
            console.print(f"  {layers}: {t.sequences} tables of {t.once} shared + {t.per_request} per request + "
                          f"{t.per_sequence} own blocks reference {t.referenced_blocks:,} of {t.blocks:,} blocks")


def print_decode_steps(console: Any, steps: Any) -> None:
    """Decoding a shared workload: the checked steps, the tables' bytes against the prediction."""
    from rich.table import Table

    wrong = [t for t in steps if not t.exact]
    verdict = "[green]measured = predicted at every one[/green]" if not wrong else \
        f"[red]{len(wrong)} differ[/red]"
    console.print(f"decoded from the prompt to {steps[-1].length:,} tokens a sequence: {len(steps)} steps checked, "
                  f"{verdict}")
    table = Table(show_header=True, header_style="bold")
    for col in ("step", "tokens", "predicted B", "block tables B", "blocks", "own prompt blocks", "tokens read back"):
        table.add_column(col, justify="right")
    shown = steps if len(steps) <= 12 else [*steps[:6], *wrong[:3], *steps[-5:]]
    for t in sorted(set(shown), key=lambda s: s.step):
        table.add_row(str(t.step), f"{t.length:,}", f"{t.predicted_bytes:,}", f"{t.referenced_bytes:,}",
                      f"{t.blocks:,}", f"{t.own_prompt_blocks:,}",
                      "[green]yes[/green]" if t.tokens_ok else "[red]no[/red]")
    console.print(table)


def print_verify(console: Any, r: Any) -> None:
    """The predicted-vs-measured table, then the max-batch search, the decode step and the notes."""
    from rich.table import Table

    total = f"{r.device_total_bytes:,} B" if r.device_total_bytes else "unknown"
    console.print(f"[bold]{escape(r.model_id)}[/bold]  {r.engine} {r.engine_version}  kv {r.kv_dtype}  batch {r.batch}  "
                  f"context {r.context:,}  on {r.device} ({r.device_name}, {total})")
    blocks = f", {r.num_blocks:,} blocks of {r.block_size}" if r.num_blocks is not None else ""
    console.print(f"{r.buffers} buffers{blocks}")
    table = Table(show_header=True, header_style="bold")
    for col in ("component", "layers", "predicted B", "measured B", "error B", "error %"):
        table.add_column(col, justify="left" if col == "component" else "right")
    for c in r.components:
        table.add_row(c.name, str(c.layers), f"{c.predicted_bytes:,}", f"{c.measured_bytes:,}",
                      f"{c.error_bytes:+,}", _pct(c.error_bytes, c.predicted_bytes))
    p = r.predicted_bytes
    table.add_row("[bold]tensor storage[/bold]", "", f"{p:,}", f"{r.measured_storage_bytes:,}",
                  f"{r.measured_storage_bytes - p:+,}", _pct(r.measured_storage_bytes - p, p))
    if r.reserved_bytes is not None:
        table.add_row("memory_allocated Δ", "", f"{p:,}", f"{r.allocated_bytes:,}", f"{r.error_bytes:+,}",
                      _pct(r.error_bytes, p))
        table.add_row("memory_reserved Δ", "", f"{p:,}", f"{r.reserved_bytes:,}", f"{r.reserved_bytes - p:+,}",
                      _pct(r.reserved_bytes - p, p))
        if r.driver_bytes is not None:
            table.add_row("driver (mem_get_info) Δ", "", f"{p:,}", f"{r.driver_bytes:,}",
                          f"{r.driver_bytes - p:+,}", _pct(r.driver_bytes - p, p))
    console.print(table)
    if r.reserved_bytes is not None:
        whole = (f", {r.unsplit_blocks} handed out as whole segments (+{_b(r.unsplit_bytes)})"
                 if r.unsplit_blocks else "")
        console.print(f"caching allocator: {r.buffers} requests rounded to 512 B{whole} = {_b(r.allocator_bytes)} "
                      f"expected allocated; segments (2 MiB for requests up to 1 MiB, 20 MiB for 1-10 MiB, larger "
                      f"rounded to 2 MiB) = {_b(r.segment_bytes)} expected reserved; peak {_b(r.peak_allocated_bytes)}")
    verdict = "[green]exact[/green]" if r.exact else "[red]differs[/red]"
    console.print(f"tensors vs prediction: {verdict}; everything freed: {'yes' if r.released else '[red]no[/red]'}")
    if r.sharing is not None:
        print_sharing(console, r)
    if r.max_batch is not None:
        mb = r.max_batch
        predicted = "-" if mb.predicted is None else f"{mb.predicted:,}"
        err = "" if mb.error_pct is None else f" ({mb.error_pct:+.2f} %)"
        console.print(f"max batch within {_b(mb.budget_bytes)}: measured {mb.measured:,}, max-batch predicts "
                      f"{predicted}{err}, the estimate's bytes allow {mb.from_estimate:,}; "
                      f"{len(mb.probes)} probes: " + ", ".join(f"{b}{'✓' if f else '✗'}" for b, f, _, _ in mb.probes))
    if r.decode is not None:
        d = r.decode
        bound = "-" if d.bound_seconds is None else f"{d.bound_seconds * 1e3:.3f} ms"
        ws = _b(d.peak_workspace_bytes)
        console.print(f"decode step: {d.seconds * 1e3:.3f} ms (median of {d.repeats}); bandwidth bound {bound}; "
                      f"cache read {_b(d.read_bytes)}; peak workspace {ws}")
        if d.steps:
            print_decode_steps(console, d.steps)
    for note in r.notes:
        _said(console, f"• {note}", "dim")
