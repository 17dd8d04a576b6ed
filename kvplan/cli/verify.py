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

    from kvplan.render.formats import check_format, write

    fmt = fmt.lower()
    check_format("VerifyResult", fmt)
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
    write(result, fmt, sys.stdout, activation=act)
    if not result.exact:
        sys.stderr.write(f"kvplan: verify: the tensors hold {result.measured_storage_bytes:,} B, "
                         f"the prediction is {result.predicted_bytes:,} B\n")
        raise typer.Exit(1)
    if act is not None and act.skipped is None and not act.cache_exact:
        sys.stderr.write(f"kvplan: verify: transformers' cache holds {act.cache_bytes:,} B, kvplan's hf rule "
                         f"predicts {act.predicted_cache_bytes:,} B\n")
        raise typer.Exit(1)


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
    from kvplan.render.formats import write

    write(result, fmt, sys.stdout)
    if result.errors:
        first = result.errors[0]
        more = f" (and {len(result.errors) - 1} more rank(s))" if len(result.errors) > 1 else ""
        sys.stderr.write(f"kvplan: error: rank {first.rank}: {first.error}{more}\n")
        raise typer.Exit(2)
    if not result.exact:
        wrong = [r.rank for r in result.ranks if not r.exact]
        sys.stderr.write(f"kvplan: verify: rank(s) {', '.join(map(str, wrong))} hold other bytes than predicted\n")
        raise typer.Exit(1)
