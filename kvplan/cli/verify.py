"""``kvplan verify``: allocate the engine's real caches on a device and compare with the prediction."""

from __future__ import annotations

from collections.abc import Callable

from typing import Any, Optional

import typer

FIELDS: dict[str, str] = {"name": "model", "format": "fmt", "contexts": "context", "batches": "batch"}
"""Library parameter -> this command's parameter, where they differ."""


def command() -> Callable[..., None]:
    """The typer command function."""
    return verify_command


def verify_command(
    model: str = typer.Argument(..., help="Bundled model id, config.json, model directory, YAML spec or Hub id."),
    batch: Optional[str] = typer.Option(None, "--batch", "-b", help="Sequences in the batch (default 1; with --find-max-batch: the batch found)."),
    context: Optional[str] = typer.Option(None, "--context", "-c", help="Tokens per sequence: 8192 or 8k (k = 1024); default 8k, or prompt + output."),
    engine: str = typer.Option("vllm", "--engine", "-e", help="Tensor layout: vllm, hf (DynamicCache) or hf-static (StaticCache)."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="Which release's rules (e.g. 4.57 for transformers' expanded MLA)."),
    kv_dtype: str = typer.Option("auto", "--kv-dtype", "--kv-cache-dtype", "-d", help="KV dtype: auto, bf16, fp16, fp32, fp8, fp8_e5m2, int8_per_token_head, fp8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla."),
    block_size: Optional[str] = typer.Option(None, "--block-size", help="vLLM block size in tokens."),
    device: Optional[str] = typer.Option(None, "--device", help="cuda:N (default cuda:0; CUDA_VISIBLE_DEVICES applies) or cpu."),
    find_max_batch: bool = typer.Option(False, "--find-max-batch", help="Bisect the largest batch that really allocates within the budget (requests of --n samples or --beam-width beams, with what they share)."),
    gpu_memory_utilization: Optional[str] = typer.Option(None, "--gpu-memory-utilization", help="CUDA budget: this fraction of total memory less what is in use (default 0.9)."),
    memory_budget: Optional[str] = typer.Option(None, "--memory-budget", help="Budget in bytes for --find-max-batch, e.g. 2GiB (required on the CPU; at most what the device can allocate)."),
    with_weights: bool = typer.Option(False, "--with-weights", help="Also allocate buffers of the model's weight sizes first."),
    decode: bool = typer.Option(False, "--decode", help="Time one decode step of attention over the cache."),
    repeats: str = typer.Option("5", "--repeats", help="Timed decode steps, 1 to 1,000 (median reported)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="Catalog GPU for the decode bandwidth bound (default: the device's name)."),
    tp: str = typer.Option("1", "--tp", help="Tensor-parallel ranks: each rank allocates its shard (with torchrun or --launch)."),
    pp: str = typer.Option("1", "--pp", help="Pipeline stages: each rank allocates its stage's layers (with torchrun or --launch)."),
    launch: Optional[str] = typer.Option(None, "--launch", help="Start this many rank processes here (= tp x pp), torch.distributed over loopback (at most 8 per CPU, within the host's memory)."),
    timeout: str = typer.Option("300", "--timeout", help="Seconds the ranks may wait on each other (process-group timeout)."),
    activation: bool = typer.Option(False, "--activation", help="Also run one transformers forward from the config (random weights) and measure its activation peak."),
    fmt: str = typer.Option("table", "--format", "-f", help="table or json."),
    prompt_len: Optional[str] = typer.Option(None, "--prompt-len", help="Prompt tokens per request (context = prompt + output), e.g. 6k."),
    output_len: Optional[str] = typer.Option(None, "--output-len", help="Generated tokens per request, e.g. 2k."),
    shared_prefix: Optional[str] = typer.Option(None, "--shared-prefix", help="Leading prompt tokens common to every request: vLLM allocates its full blocks once."),
    n: Optional[str] = typer.Option(None, "--n", help="Parallel samples per request (vLLM: shared prompt blocks; transformers: batch x n rows)."),
    beam_width: Optional[str] = typer.Option(None, "--beam-width", help="Beams per request (vLLM: shared prompt blocks; transformers: batch x beams rows)."),
    speculative_method: Optional[str] = typer.Option(None, "--speculative-method", help="Speculative decoding (vLLM, transformers): ngram, eagle, eagle3, mtp or draft_model (default with --speculative-model: from its name)."),
    num_speculative_tokens: Optional[str] = typer.Option(None, "--num-speculative-tokens", help="Draft tokens per step (k), e.g. 3; needed except with mtp."),
    speculative_model: Optional[str] = typer.Option(None, "--speculative-model", help="The draft model or EAGLE head (bundled id, config.json, directory or YAML spec)."),
) -> None:
    """Allocate the KV cache as the engine would, on a real device, and compare with the prediction.

    Examples:

      kvplan verify meta-llama/Llama-3.1-8B --batch 16 --context 32k --engine vllm

      kvplan verify deepseek-ai/DeepSeek-V2-Lite --batch 4 --context 8k --engine hf --kv-dtype bf16

      kvplan verify Qwen/Qwen3-8B --find-max-batch --context 8k --gpu-memory-utilization 0.9

      kvplan verify google/gemma-3-27b-it --batch 8 --context 16k --decode

      kvplan verify gpt2 --device cpu --batch 2 --context 1k

      kvplan verify meta-llama/Llama-3.1-8B --device cpu -b 4 --prompt-len 3k --output-len 1k --shared-prefix 2k

      kvplan verify meta-llama/Llama-3.1-8B --device cpu -b 2 -c 2k --speculative-model meta-llama/Llama-3.2-1B-Instruct --num-speculative-tokens 3

      torchrun --nproc-per-node 4 -m kvplan verify meta-llama/Llama-3.1-70B --tp 4 -b 16 -c 32k

      kvplan verify deepseek-ai/DeepSeek-V2-Lite --tp 2 --pp 2 --launch 4 --device cpu -b 1 -c 2k

    Needs torch (pip install 'kvplan\\[verify]'). Exit status 1 when the tensors' bytes differ from the prediction.
    """
    import sys

    from kvplan.cli.values import number, sharing_args, whole
    from kvplan.errors import UsageError
    from kvplan.hardware import parse_bytes
    from kvplan.units import parse_count
    from kvplan.verify import verify

    fmt = fmt.lower()
    if fmt not in ("table", "json"):
        raise UsageError(f"unknown format '{fmt}' (known: table, json)", field="fmt")
    from kvplan.verify.decode import check_repeats
    from kvplan.verify.distributed import MAX_TIMEOUT_S, under_torchrun

    tp, pp = whole(tp, "tp"), whole(pp, "pp")
    launch, timeout = whole(launch, "launch"), whole(timeout, "timeout")
    steps = check_repeats(whole(repeats, "repeats"))  # refused whatever runs, never ignored
    if not 0 < timeout <= MAX_TIMEOUT_S:  # read by the ranks only, checked for every run alike
        raise UsageError(f"--timeout {timeout} must be positive, at most {MAX_TIMEOUT_S:,} s (a week)")
    if memory_budget is not None and not find_max_batch:  # read only by the search: never silently dropped
        raise UsageError("is the budget of --find-max-batch: give both, or neither", field="memory_budget")
    # parsed as kvplan estimate parses them (kvplan/cli/estimate.py)
    sharing = sharing_args(prompt_len, output_len, shared_prefix, n, beam_width, speculative_method,
                           num_speculative_tokens, speculative_model)
    if launch is not None or tp != 1 or pp != 1 or under_torchrun():
        from kvplan.verify.ranks import check_parallel

        check_parallel(tp, pp)  # --pp -5 read as "-5 ranks: run torchrun --nproc-per-node -5"
        for flag, given in (("--find-max-batch", find_max_batch), ("--decode", decode),
                            ("--with-weights", with_weights), ("--activation", activation)):
            if given:
                raise UsageError(f"{flag} measures one device: not with --tp, --pp, --launch or under torchrun")
        rows = whole(batch, "batch")  # 0 reaches the library, which refuses it by field (``or 1`` would hide it)
        _ranks(model, 1 if rows is None else rows, parse_count(context, "context") if context is not None else None, engine,
               engine_version, kv_dtype, whole(block_size, "block_size"), device, tp, pp, launch, timeout, fmt,
               sharing)
        return
    if activation:
        from kvplan.verify.activation import import_transformers

        import_transformers()  # a missing transformers fails before anything is allocated
    result = verify(
        model, batch=whole(batch, "batch"), context=parse_count(context, "context") if context is not None else None, engine=engine,
        engine_version=engine_version, kv_dtype=kv_dtype, block_size=whole(block_size, "block_size"), device=device,
        find_max_batch=find_max_batch, gpu_memory_utilization=number(gpu_memory_utilization, "gpu_memory_utilization"),
        memory_budget=parse_bytes(memory_budget, "memory_budget") if memory_budget is not None else None,
        with_weights=with_weights, decode=decode, repeats=steps, gpu=gpu, **sharing,
    )
    act = None
    if activation:
        from kvplan.verify.activation import measure_activation

        act = measure_activation(model, batch=result.batch, tokens=result.context, device=device)
    if fmt == "json":
        import json

        data = result.to_dict()
        if act is not None:
            data["activation"] = act.to_dict()
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        from kvplan.render.console import make_console

        console = make_console()
        print_verify(console, result)
        if act is not None:
            print_activation(console, act)
    if not result.exact:
        sys.stderr.write(f"kvplan: verify: the tensors hold {result.measured_storage_bytes:,} B, "
                         f"the prediction is {result.predicted_bytes:,} B\n")
        raise typer.Exit(1)
    if act is not None and act.skipped is None and not act.cache_exact:
        sys.stderr.write(f"kvplan: verify: transformers' cache holds {act.cache_bytes:,} B, kvplan's hf rule "
                         f"predicts {act.predicted_cache_bytes:,} B\n")
        raise typer.Exit(1)


def print_activation(console: Any, a: Any) -> None:
    """The transformers forward: weights, cache against the hf rule, the activation peak against the estimate."""
    console.print(f"[bold]--activation[/bold]: transformers {a.transformers_version} forward of {a.batch} x "
                  f"{a.tokens:,} tokens on {a.device}, {a.dtype}, {a.attn_implementation} attention, random weights")
    if a.skipped:
        console.print(f"[yellow]{a.skipped}[/yellow]")
    else:
        verdict = "[green]exact[/green]" if a.cache_exact else "[red]differs[/red]"
        console.print(f"weights {_b(a.weights_bytes)}; cache {_b(a.cache_bytes)} (storage kept alive "
                      f"{_b(a.cache_storage_bytes)}), kvplan hf rule {_b(a.predicted_cache_bytes)}: {verdict}")
        err = "" if a.activation_error_pct is None else f" ({a.activation_error_pct:+.1f} % vs measured)"
        console.print(f"activation peak: measured {_b(a.activation_bytes)}, kvplan estimates "
                      f"{_b(a.predicted_activation_bytes)}{err} = {a.predicted_formula}")
    for note in a.notes:
        console.print(f"[dim]• {note}[/dim]")


def _ranks(model: str, batch: int, context: int | None, engine: str, engine_version: str | None, kv_dtype: str,
           block_size: int | None, device: str | None, tp: int, pp: int, launch: int | None, timeout: int,
           fmt: str, sharing: dict[str, Any]) -> None:
    """One rank per process (torchrun or --launch); rank 0 (or the launcher) renders everyone's shard."""
    import sys

    import time

    from kvplan.errors import KvplanError
    from kvplan.verify.distributed import RankError, launch as start, rank_env, run_rank, under_torchrun

    kw = dict(tp=tp, pp=pp, batch=batch, context=context, engine=engine, engine_version=engine_version,
              kv_dtype=kv_dtype, block_size=block_size, device=device, timeout_s=timeout, **sharing)
    if launch is not None:
        result = start(model, nprocs=launch, **kw)  # type: ignore[arg-type]
    elif under_torchrun():
        # torchrun stops every rank as soon as one exits with an error: so the other ranks exit 0 once
        # everything is gathered and rank 0 alone carries the verdict (and prints it)
        rank = rank_env().rank
        try:
            result = run_rank(model, **kw)  # type: ignore[arg-type]
        except KvplanError as exc:
            if rank != 0 and not isinstance(exc, RankError):
                # every rank refuses the same flags: rank 0 says it once; wait so torchrun does not
                # stop rank 0 before it has
                time.sleep(2)
                raise typer.Exit(2) from None
            raise
        if rank != 0:
            raise typer.Exit(0)
    else:
        from kvplan.errors import UsageError

        n = tp * pp
        raise UsageError(f"--tp {tp} --pp {pp} is {n} ranks: run `torchrun --nproc-per-node {n} -m kvplan verify "
                         f"...` or add --launch {n}")
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        from kvplan.render.console import make_console

        print_ranks(make_console(), result)
    if result.errors:
        first = result.errors[0]
        more = f" (and {len(result.errors) - 1} more rank(s))" if len(result.errors) > 1 else ""
        sys.stderr.write(f"kvplan: error: rank {first.rank}: {first.error}{more}\n")
        raise typer.Exit(2)
    if not result.exact:
        wrong = [r.rank for r in result.ranks if not r.exact]
        sys.stderr.write(f"kvplan: verify: rank(s) {', '.join(map(str, wrong))} hold other bytes than predicted\n")
        raise typer.Exit(1)


def print_ranks(console: Any, r: Any) -> None:
    """One table: per rank, each component's predicted and measured bytes, the rank's total, the sum."""
    from rich.table import Table

    blocks = f"  block {r.block_size}" if r.block_size else ""
    devices = sorted({k.device for k in r.ranks})
    console.print(f"[bold]{r.model_id}[/bold]  {r.engine} {r.engine_version}  kv {r.kv_dtype}{blocks}  batch {r.batch}"
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
        console.print(f"[red]rank {k.rank}: {k.error}[/red]")
    verdict = "[green]every rank exact[/green]" if r.exact else "[red]differs[/red]"
    freed = all(k.released for k in r.ranks)
    console.print(f"tensors vs prediction: {verdict}; everything freed: {'yes' if freed else '[red]no[/red]'}")
    for note in r.notes:
        console.print(f"[dim]• {note}[/dim]")


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
    console.print(f"[bold]{r.model_id}[/bold]  {r.engine} {r.engine_version}  kv {r.kv_dtype}  batch {r.batch}  "
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
        console.print(f"caching allocator: {r.buffers} requests rounded to 512 B = {_b(r.allocator_bytes)} expected "
                      f"allocated; segments (2 MiB for requests up to 1 MiB, 20 MiB for 1-10 MiB, larger rounded "
                      f"to 2 MiB) = {_b(r.segment_bytes)} expected reserved; peak {_b(r.peak_allocated_bytes)}")
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
        console.print(f"[dim]• {note}[/dim]")
