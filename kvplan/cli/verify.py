"""``kvplan verify``: allocate the engine's real caches on a device and compare with the prediction."""

from __future__ import annotations


from typing import Any

from kvplan.cli import options as o
from kvplan.cli.guard import Exit
from kvplan.cli.options import Arg, Opt

FIELDS: dict[str, str] = {"name": "model", "format": "fmt", "contexts": "context", "batches": "batch"}
"""Library parameter -> this command's parameter, where they differ."""

BEFORE: tuple[Opt, ...] = (
    o.BATCH.but(default=None, help="Sequences in the batch (default 1; with --find-max-batch: the batch found)."),
    o.CONTEXT.but(help="Tokens per sequence: 8192 or 8k (k = 1024); default 8k, or prompt + output."),
)
"""The options before --engine, whose help lists the engines with a tensor layout (``tensor_engines``)."""
AFTER: tuple[Opt, ...] = (
    o.ENGINE_VERSION.but(help="Which release's rules (e.g. 4.57 for transformers' expanded MLA)."),
    o.KV_DTYPE.but(names=("--kv-dtype", "--kv-cache-dtype", "-d"), help="KV dtype: auto, bf16, fp16, fp32, fp8, "
                   "fp8_e5m2, int8_per_token_head, fp8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla."),
    o.BLOCK_SIZE.but(help="Block size in tokens."),
    Opt("device", ("--device",), None, "cuda:N (default cuda:0; CUDA_VISIBLE_DEVICES applies) or cpu."),
    Opt("find_max_batch", ("--find-max-batch",), False, "Bisect the largest batch that really allocates within "
        "the budget (requests of --n samples or --beam-width beams, with what they share).", flag=True),
    Opt("gpu_memory_utilization", ("--gpu-memory-utilization",), None, "CUDA budget: this fraction of total "
        "memory less what is in use (default 0.9)."),
    Opt("memory_budget", ("--memory-budget",), None, "Budget in bytes for --find-max-batch, e.g. 2GiB (required "
        "on the CPU; at most what the device can allocate)."),
    Opt("with_weights", ("--with-weights",), False, "Also allocate buffers of the model's weight sizes first.",
        flag=True),
    Opt("decode", ("--decode",), False, "Time one decode step of attention over the cache.", flag=True),
    Opt("repeats", ("--repeats",), "5", "Timed decode steps, 1 to 1,000 (median reported)."),
    o.GPU.but(help="Catalog GPU for the decode bandwidth bound (default: the device's name)."),
    o.TP.but(default="1", help="Tensor-parallel ranks: each rank allocates its shard (with torchrun or --launch)."),
    o.PP.but(default="1", help="Pipeline stages: each rank allocates its stage's layers (with torchrun or "
             "--launch)."),
    Opt("launch", ("--launch",), None, "Start this many rank processes here (= tp x pp), torch.distributed over "
        "loopback (at most 8 per CPU, within the host's memory)."),
    Opt("timeout", ("--timeout",), "300", "Seconds the ranks may wait on each other (process-group timeout)."),
    Opt("activation", ("--activation",), False, "Also run one transformers forward from the config (random "
        "weights) and measure its activation peak.", flag=True),
    o.FORMAT.but(help="table or json."),
    o.PROMPT_LEN, o.OUTPUT_LEN,
    o.SHARED_PREFIX.but(help="Leading prompt tokens common to every request: the engine allocates its full "
                        "blocks once."),
    o.N.but(help="Parallel samples per request (shared prompt blocks where the engine pages; otherwise batch x n "
            "rows)."),
    o.BEAM_WIDTH.but(help="Beams per request (shared prompt blocks where the engine pages; otherwise batch x beams "
                     "rows)."),
    o.SPECULATIVE_METHOD.but(help="Speculative decoding: ngram, eagle, eagle3, mtp or draft_model (default with "
                             "--speculative-model: from its name)."),
    o.NUM_SPECULATIVE_TOKENS.but(help="Draft tokens per step (k), e.g. 3; needed except with mtp."),
    o.SPECULATIVE_MODEL,
)

DOC = """Allocate the KV cache as the engine would, on a real device, and compare with the prediction.

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


def tensor_engines() -> list[str]:
    """The registered engines with a tensor layout ``verify`` allocates (``Engine.tensor_plan``)."""
    import kvplan.engines as engines

    return [name for name in engines.ENGINE_NAMES if "tensor_plan" in vars(type(engines.get_engine(name)))]


def options() -> tuple[Opt, ...]:
    return (*BEFORE, o.engine_opt("Tensor layout", tensor_engines()), *AFTER)


ARGUMENT = Arg("model", "Bundled model id, config.json, model directory, YAML spec or Hub id.")


def run(model: str, **v: Any) -> None:
    """Check the values, then allocate on one device (``_one``) or one rank per process (``_ranks``)."""
    from kvplan.cli.values import sharing_args, whole
    from kvplan.errors import UsageError
    from kvplan.units import parse_count

    from kvplan.render.formats import check_format

    fmt = v["fmt"].lower()
    check_format("VerifyResult", fmt)
    from kvplan.verify.decode import check_repeats
    from kvplan.verify.distributed import MAX_TIMEOUT_S, under_torchrun

    tp, pp = whole(v["tp"], "tp"), whole(v["pp"], "pp")
    launch, timeout = whole(v["launch"], "launch"), whole(v["timeout"], "timeout")
    steps = check_repeats(whole(v["repeats"], "repeats"))  # refused whatever runs, never ignored
    if not 0 < timeout <= MAX_TIMEOUT_S:  # read by the ranks only, checked for every run alike
        raise UsageError(f"--timeout {timeout} must be positive, at most {MAX_TIMEOUT_S:,} s (a week)")
    if v["memory_budget"] is not None and not v["find_max_batch"]:  # read only by the search: never silently dropped
        raise UsageError("is the budget of --find-max-batch: give both, or neither", field="memory_budget")
    # parsed as kvplan estimate parses them (kvplan/cli/estimate.py)
    sharing = sharing_args(*(v[opt.dest] for opt in o.SHARING))
    context = parse_count(v["context"], "context") if v["context"] is not None else None
    if launch is not None or tp != 1 or pp != 1 or under_torchrun():
        from kvplan.verify.ranks import check_parallel

        check_parallel(tp, pp)  # --pp -5 read as "-5 ranks: run torchrun --nproc-per-node -5"
        for flag in ("find_max_batch", "decode", "with_weights", "activation"):
            if v[flag]:
                raise UsageError(f"--{flag.replace('_', '-')} measures one device: not with --tp, --pp, --launch "
                                 "or under torchrun")
        rows = whole(v["batch"], "batch")  # 0 reaches the library, which refuses it by field (``or 1`` would hide it)
        _ranks(model, 1 if rows is None else rows, context, v["engine"], v["engine_version"], v["kv_dtype"],
               whole(v["block_size"], "block_size"), v["device"], tp, pp, launch, timeout, fmt, sharing)
        return
    _one(model, v, fmt, steps, sharing, context)


def _one(model: str, v: dict[str, Any], fmt: str, steps: int, sharing: dict[str, Any], context: int | None) -> None:
    """Allocate on one device, render, and exit 1 where the bytes differ from the prediction."""
    import sys

    from kvplan.cli.values import number, whole
    from kvplan.hardware import parse_bytes
    from kvplan.verify import verify

    if v["activation"]:
        from kvplan.verify.activation import import_transformers

        import_transformers()  # a missing transformers fails before anything is allocated
    budget = v["memory_budget"]
    result = verify(
        model, batch=whole(v["batch"], "batch"), context=context, engine=v["engine"],
        engine_version=v["engine_version"], kv_dtype=v["kv_dtype"], block_size=whole(v["block_size"], "block_size"),
        device=v["device"], find_max_batch=v["find_max_batch"],
        gpu_memory_utilization=number(v["gpu_memory_utilization"], "gpu_memory_utilization"),
        memory_budget=parse_bytes(budget, "memory_budget") if budget is not None else None,
        with_weights=v["with_weights"], decode=v["decode"], repeats=steps, gpu=v["gpu"], **sharing,
    )
    act = None
    if v["activation"]:
        from kvplan.verify.activation import measure_activation

        act = measure_activation(model, batch=result.batch, tokens=result.context, device=v["device"])
    from kvplan.render.formats import write

    write(result, fmt, sys.stdout, activation=act)
    if not result.exact:
        sys.stderr.write(f"kvplan: verify: the tensors hold {result.measured_storage_bytes:,} B, "
                         f"the prediction is {result.predicted_bytes:,} B\n")
        raise Exit(1)
    if act is not None and act.skipped is None and not act.cache_exact:
        sys.stderr.write(f"kvplan: verify: transformers' cache holds {act.cache_bytes:,} B, kvplan's hf rule "
                         f"predicts {act.predicted_cache_bytes:,} B\n")
        raise Exit(1)


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
                raise Exit(2) from None
            raise
        if rank != 0:
            raise Exit(0)
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
        raise Exit(2)
    if not result.exact:
        wrong = [r.rank for r in result.ranks if not r.exact]
        sys.stderr.write(f"kvplan: verify: rank(s) {', '.join(map(str, wrong))} hold other bytes than predicted\n")
        raise Exit(1)
