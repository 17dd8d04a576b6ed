"""The checks of one deployment's plan against what it requires (min context, min concurrency,
headroom), the fp8 suggestion, and the result fields filled from the plan. Split from ``checks.py``,
which reads the deployment and makes the plans."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from collections.abc import Callable

from kvplan.deploy.deployment import Deployment
from kvplan.deploy.report import DeploymentResult, Finding
from kvplan.engines.serve import serve_flags
from kvplan.errors import KvplanError
from kvplan.units import format_bytes


def _finding(dep: Deployment, severity: str, code: str, message: str, line: int | None, **kw: Any) -> Finding:
    return Finding(severity, code, message, dep.file, line, deployment=dep.name, **kw)  # type: ignore[arg-type]


def _requirement_checks(dep: Deployment, plan: Any, req: dict[str, Any], run: Callable[..., Any],
                        fp8: Callable[..., Any], add: Callable[[Finding], None], *, label: str,
                        code: str | None = None) -> bool:
    failed = False
    min_context = req.get("min_context")
    if min_context is not None and not label:
        if plan.max_model_len < min_context:
            failed = True
            add(_finding(dep, "error", "min-context", f"{dep.spelled('max_model_len')} {plan.max_model_len:,} is "
                         f"below the required min-context {min_context:,}; {plan.max_model_len_fit:,} fits",
                         dep.line_of("max_model_len"), value=plan.max_model_len, fits=plan.max_model_len_fit))
    elif min_context is not None and plan.max_model_len_fit < min_context:
        failed = True
        add(_finding(dep, "error", code or "min-context", f"{label}min-context {min_context:,} does not fit; "
                     f"{plan.max_model_len_fit:,} fits", dep.line_of("min_context"), value=min_context,
                     fits=plan.max_model_len_fit))
    want = req.get("min_concurrency")
    if want is not None:
        at = req.get("at_context") or plan.max_model_len
        if at > plan.max_model_len and not label:
            failed = True
            add(_finding(dep, "error", "min-concurrency", f"at-context {at:,} is longer than "
                         f"{dep.spelled('max_model_len')} {plan.max_model_len:,}: the engine rejects such requests",
                         dep.line_of("at_context"), value=at, fits=plan.max_model_len))
            return failed
        prefix = req.get("shared_prefix") or 0
        if prefix > at:
            failed = True
            add(_finding(dep, "error", "invalid-input", f"shared-prefix {prefix:,} is longer than the "
                         f"{at:,}-token context of min-concurrency", dep.line_of("shared_prefix"), value=prefix,
                         invalid_input=True))
            return failed
        n = req.get("n") or 1  # samples the engine shares a prompt among (max_batch counts requests of n)
        copies = req.get("unshared_n") or 1  # samples it stores apart: the plan counts sequences
        beams = req.get("beam_width") or 1  # TensorRT-LLM runs every request with max_beam_width beams
        share = {**({"shared_prefix": prefix} if prefix else {}), **({"n": n} if n > 1 else {}),
                 **({"beam_width": beams} if beams > 1 else {})}
        try:
            # its max batch and KV memory alone: no budget interval (``run(points_only=True)``)
            at_plan = run(points_only=True, context=at, **share) if at != plan.context or share else plan
        except KvplanError as exc:  # the engine's rules refuse this workload (a shared prefix it cannot plan)
            add(_finding(dep, "error", "engine-refuses", str(exc), dep.line_of(exc.field or "min_concurrency")))
            return True
        shared = f" sharing a {prefix:,}-token prefix" if prefix else ""
        samples = n * copies
        what = "sequences" if samples == 1 else f"requests of n = {samples}"
        if beams > 1:
            what = f"requests of {beams} beams" if samples == 1 else f"requests of n = {samples} x {beams} beams"
        held = at_plan.max_batch // copies
        if held < want:
            failed = True
            add(_finding(dep, "error", code or "min-concurrency",
                         f"{label}min-concurrency {want} {what} of {at:,} tokens{shared}: the KV cache holds "
                         f"{held} ({format_bytes(max(at_plan.per_gpu.kv_cache_bytes, 0))} of KV per GPU)",
                         dep.line_of("min_concurrency"), value=want, fits=held,
                         suggestion=fp8(lambda p: p.max_batch // copies >= want,
                                        lambda p: f"{p.max_batch // copies} fit with fp8", context=at, **share)))
        seqs = dep.setting("max_num_seqs") or plan.engine_defaults.get("max_num_seqs")
        # vLLM's scheduler runs each of the n samples as its own request (ParallelSampling's child requests),
        # and max_num_seqs counts those
        if seqs is not None and seqs < want * samples and not label:
            failed = True
            where = dep.spelled("max_num_seqs") if "max_num_seqs" in dep.settings else "the engine's default max-num-seqs"
            needs = f"{want}" if samples == 1 else f"{want} x n = {want * samples} sequences"
            add(_finding(dep, "error", "min-concurrency", f"{where} {int(seqs)} caps concurrency below the "
                         f"required min-concurrency {needs}", dep.line_of("max_num_seqs"), value=int(seqs),
                         fits=want * samples))
    return failed


def _fp8_suggester(dep: Deployment, plan: Any, run: Callable[..., Any]) -> Callable[..., str | None]:
    """suggest(test, describe, **over): the fp8 suggestion where the fp8 plan passes ``test``."""
    def suggest(test: Callable[[Any], bool], describe: Callable[[Any], str], **over: Any) -> str | None:
        serve = serve_flags(dep.engine)
        if serve is None or plan.kv_dtype.startswith(("fp8", "int", "nvfp4", "q")):
            return None
        try:
            p8 = run(points_only=True, kv_dtype="fp8", **over)  # its own figures: no budget interval
        except KvplanError:
            return None
        if not test(p8):
            return None
        if dep.source == "kvplan":
            how = "engine.kv_cache_dtype: fp8"
        elif dep.source == "helm":
            how = "extraArgs --kv-cache-dtype fp8"
        else:
            how = serve.fp8_kv_flag
        return f"{how} would pass: {describe(p8)}"

    return suggest


def _fill(result: DeploymentResult, plan: Any) -> None:
    result.engine = plan.engine
    result.engine_version = plan.engine_version
    result.kv_dtype = plan.kv_dtype
    result.max_model_len = plan.max_model_len
    result.max_num_seqs = int(plan.engine_defaults["max_num_seqs"]) if "max_num_seqs" in plan.engine_defaults else None
    result.kv_cache_bytes_per_gpu = plan.per_gpu.kv_cache_bytes
    result.request_kv_bytes = plan.request_kv_bytes
    result.max_model_len_fit = plan.max_model_len_fit
    result.max_concurrency = plan.max_concurrency
    result.kv_cache_tokens = plan.kv_cache_tokens
    result.assumptions = list(plan.assumptions)
    result.offload = dict(plan.offload) if plan.offload is not None else None
    result.weights_bytes_per_gpu = plan.per_gpu.weights_bytes


def capped_plan(dep: Deployment, plan: Any, cap: int, kwargs: dict[str, Any], run: Any, add: Any, line: int | None) -> Any:
    """The plan with the GPU pool capped at ``cap`` tokens rounded up to whole blocks (TensorRT-LLM's
    kv_cache_config.max_tokens: ``calculateMaxNumBlocks`` keeps the smaller of it and the memory's tokens, then
    ``ceilDiv`` by tokens_per_block): the pool's bytes scaled to those blocks."""
    block = plan.block_size or 1
    tokens = -(-cap // block) * block
    if tokens >= plan.kv_cache_tokens:
        return plan
    capped = plan.per_gpu.kv_cache_bytes * tokens // plan.kv_cache_tokens
    from kvplan.record import replace

    kwargs["settings"] = replace(kwargs["settings"], kv_cache_memory_bytes=capped)
    add(_finding(dep, "note", "kv-token-cap", f"kv_cache_config.max_tokens {cap:,}: the pool holds {tokens:,} tokens "
                 f"({format_bytes(capped)} per GPU), not the {plan.kv_cache_tokens:,} the memory allows",
                 line, value=cap, fits=plan.kv_cache_tokens))
    return run()
