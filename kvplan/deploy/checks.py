"""The checks of ``kvplan check``: every number comes from ``kvplan.max_batch``; this layer compares.

Per deployment and GPU type:
- fits: vLLM's own start-up check, one sequence of max_model_len (error, with the longest that fits);
- max_num_seqs x max_model_len reachable at once (warning; error with ``max_num_seqs_reachable``);
- requirements: min_context, min_concurrency at a context, the same again with headroom;
- GPUs given vs tp x pp x dp; tp beyond the model's KV heads (warning);
- a failing deployment that fp8 KV cache would make pass gets that as its suggestion.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any
    from pathlib import Path

import os

from kvplan.budgets import Settings
from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.host_memory import pinned_check
from kvplan.deploy.report import DeploymentResult, Finding
from kvplan.deploy.requirements import (
    _fill,
    _finding,
    _fp8_suggester,
    _requirement_checks,
    capped_plan,
)
from kvplan.engines.serve import serve_flags, shown
from kvplan.errors import KvplanError, UsageError
from kvplan.record import dataclass, field, replace
from kvplan.spec import ModelSpec
from kvplan.units import format_bytes


@dataclass
class Context:
    catalog_file: Path | None = None
    gpu: str | None = None
    """--gpu: the GPU type where a deployment names none."""
    specs: dict[str, ModelSpec] = field(default_factory=dict)
    """Pinned specs (--specs DIR) by id and alias, lower case."""
    online: bool = False
    calibration: Any = None
    """A kvplan.logs Calibration (--calibration) for the deployments it matches."""
    _catalog: Any = None
    _models: dict[str, Any] = field(default_factory=dict)
    _plans: dict[Any, Any] = field(default_factory=dict)
    """Plans are pure functions of (model, GPU, engine, settings): each is computed once per run."""
    _gpu_labels: dict[str, Any] = field(default_factory=dict)
    """GPU label -> catalog GPU (or the UsageError naming it): thousands of files name a few GPUs, and each
    lookup normalizes the whole catalog (``kvplan.hardware.find_gpu``)."""

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from kvplan.hardware import load_catalog

            self._catalog = load_catalog(self.catalog_file)
        return self._catalog

    def fresh(self) -> Context:
        """The same run's context with nothing remembered yet: what a worker process starts from (a plan remembers
        how it was asked, a closure that does not cross to a spawned process; its own plans are its own)."""
        return replace(self, _catalog=None, _models={}, _plans={}, _gpu_labels={})


class _Invalid(Exception):
    def __init__(self, finding: Finding) -> None:
        self.finding = finding


def check_deployment(dep: Deployment, ctx: Context) -> list[DeploymentResult]:
    base = DeploymentResult(name=dep.name, file=dep.file, line=dep.line, source=dep.source, engine=dep.engine,
                            engine_version=dep.engine_version.value if dep.engine_version else None)
    early = _reading_findings(dep)
    try:
        dep = _merge_config_files(dep, early)
        spec = _model(dep, ctx)
        gpus = _gpus(dep, ctx)
        settings = _settings(dep)
        requirements = _requirements(dep)
    except _Invalid as exc:
        base.findings = [*early, exc.finding]
        base.model = _model_text(dep)
        return [base]
    results = []
    for gpu_value, gpu in gpus:
        name = dep.name if len(gpus) == 1 else f"{dep.name} [{gpu.name}]"
        result = replace(base, name=name, findings=list(early), model=spec.id, gpu=gpu.name)
        _check_one(dep, spec, gpu, gpu_value, settings, requirements, result, ctx)
        results.append(result)
    return results


# ------------------------------------------------------------------------------------------- inputs

def _invalid(dep: Deployment, code: str, message: str, line: int | None) -> _Invalid:
    return _Invalid(_finding(dep, "error", code, message, line, invalid_input=True))


def _reading_findings(dep: Deployment) -> list[Finding]:
    out = []
    for u in dep.unknowns:
        names = ", ".join(u.names)
        default = "the model's limit" if u.spelled in ("--max-model-len", "--context-length") else "the engine's default"
        out.append(_finding(dep, "warning", "unknown-value",
                            f"{u.spelled} {shown(u.raw, quote=False)}: {names} is not defined in this file; checked "
                            f"with {default} "
                            "(give the value, or a default: ${VAR:-value})", u.line, value=u.raw))
    for note in dep.notes:
        out.append(_finding(dep, "note", "not-read", note, dep.line))
    return out


def _merge_config_files(dep: Deployment, findings: list[Finding]) -> Deployment:
    """``config_files.merge_settings``, its remarks as findings and a bad file as an invalid input."""
    from kvplan.deploy.config_files import merge_settings

    try:
        merged, remarks = merge_settings(dep)
    except KvplanError as exc:
        raise _invalid(dep, "invalid-input", str(exc), getattr(exc, "line", None)) from None
    for r in remarks:
        findings.append(_finding(dep, r.severity, r.code, r.message, merged.line_of(r.setting)))  # type: ignore[arg-type]
    return merged


def _model_text(dep: Deployment) -> str | None:
    if dep.model is None:
        return None
    return dep.model.value if isinstance(dep.model.value, str) else str(dep.model.value.get("id", "inline spec"))


def _model(dep: Deployment, ctx: Context) -> ModelSpec:
    if dep.model is None:
        unknown = [u for u in dep.unknowns if u.spelled in ("--model", "--model-path", "MODEL (positional)")]
        if unknown:
            u = unknown[0]
            raise _invalid(dep, "model-unresolved", f"the model is {u.raw}, an environment substitution kvplan "
                           "cannot resolve: give it, or name it with a kvplan/model annotation", u.line)
        raise _invalid(dep, "invalid-input", "no model: the command names none (give MODEL or --model)", dep.line)
    value, line = dep.model.value, dep.model.line
    if isinstance(value, dict):
        from kvplan.sources.yaml_spec import validate_spec

        try:
            return validate_spec(value, f"{dep.name}: model.spec")
        except KvplanError as exc:
            raise _invalid(dep, "invalid-input", str(exc), line) from None
    key = str(value)
    if key in ctx._models:
        cached = ctx._models[key]
        if isinstance(cached, Finding):
            raise _Invalid(replace(cached, file=dep.file, line=line, deployment=dep.name))
        return cached
    try:
        spec = _resolve(key, dep.base_dir, ctx)
    except _Unresolved as exc:
        finding = _finding(dep, "error", "model-unresolved", str(exc), line, invalid_input=True)
        ctx._models[key] = finding
        raise _Invalid(finding) from None
    ctx._models[key] = spec
    return spec


class _Unresolved(Exception):
    pass


def _resolve(name: str, base_dir: str, ctx: Context) -> ModelSpec:
    from kvplan.sources.resolve import _looks_like_path, load_model

    pinned = ctx.specs.get(name.lower())
    if pinned is not None:
        return pinned
    from kvplan.safe_io import path_exists, path_expanduser, path_is_absolute, path_text

    local = path_expanduser(name)  # as pathlib names it (Path(name).expanduser()), without its import
    if not path_is_absolute(local):
        local = path_text(base_dir, local)
    try:
        if path_exists(local):
            return load_model(local)
        if _looks_like_path(name) or name.startswith("/"):
            raise _Unresolved(f"model '{name}' is a path that does not exist here (a path inside the container?): "
                              "name the model with a kvplan/model annotation, or pin it with `kvplan spec`")
        from kvplan.sources.bundled import load_bundled

        spec = load_bundled(name)
        if spec is not None:
            return spec
        if ctx.online or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
            return load_model(name)
    except KvplanError as exc:
        raise _Unresolved(f"model '{name}' cannot be resolved: {exc}") from None
    raise _Unresolved(f"model '{name}' is not bundled and not pinned, and kvplan check does not reach the network: "
                      f"pin it with `kvplan spec {name} > specs/{name.split('/')[-1]}.yaml` and pass --specs specs/ "
                      "(or run with --online)")


def _gpus(dep: Deployment, ctx: Context) -> list[tuple[Value, Any]]:
    from kvplan.deploy.gpus import gpu_for_label
    from kvplan.hardware import gpu_from_memory

    values = dep.gpus or ([Value(ctx.gpu, None, "--gpu")] if ctx.gpu else [])
    if not values:
        hint = {"kubernetes": "a nodeSelector on nvidia.com/gpu.product, a kvplan/gpu annotation",
                "compose": "a kvplan/gpu label", "helm": "nodeSelectorTerms on nvidia.com/gpu.product",
                "shell": "a '# kvplan/gpu: H100' comment", "kvplan": "gpu:",
                "llm-d": "a nodeSelector on nvidia.com/gpu.product (or acceleratorTypes) in the decode/prefill section",
                "skypilot": "resources.accelerators", "ray-serve": "accelerator_type"}.get(dep.source, "")
        raise _invalid(dep, "unknown-gpu", f"no GPU type: add {hint} or pass --gpu", dep.line)
    out = []
    for v in values:
        try:
            if isinstance(v.value, dict):
                gpu = gpu_from_memory(str(v.value["memory"]))
            else:
                label = str(v.value)
                if label not in ctx._gpu_labels:
                    try:
                        ctx._gpu_labels[label] = gpu_for_label(label, ctx.catalog)
                    except KvplanError as exc:
                        ctx._gpu_labels[label] = exc
                gpu = ctx._gpu_labels[label]
                if isinstance(gpu, KvplanError):
                    raise gpu
        except KvplanError as exc:
            raise _invalid(dep, "unknown-gpu", f"{v.spelled}: {exc}", v.line) from None
        out.append((v, gpu))
    return out


def _settings(dep: Deployment) -> Settings:
    from kvplan.hardware import parse_bytes

    kw: dict[str, Any] = {}
    for key in ("gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs", "enforce_eager",
                "mem_fraction_static", "free_gpu_memory_fraction"):
        if key in dep.settings:
            kw[key] = dep.settings[key].value
    try:
        for key, target in (("kv_cache_memory", "kv_cache_memory_bytes"), ("weights_bytes", "weights_bytes")):
            if key in dep.settings:
                v = dep.settings[key].value
                kw[target] = v if isinstance(v, int) else parse_bytes(str(v), key.replace("_", "-"))
        return Settings(**kw)
    except UsageError as exc:
        bad = next((k for k in kw if k.replace("_bytes", "").replace("_", "-") in str(exc)), "")
        raise _invalid(dep, "invalid-input", f"{exc}", dep.line_of(bad.removesuffix("_bytes") if bad else "")) from None


def _requirements(dep: Deployment) -> dict[str, Any]:
    """Requirement values (annotations arrive as text: parse them here)."""
    from kvplan.units import parse_count

    out: dict[str, Any] = {}
    for key, v in dep.requirements.items():
        value = v.value
        try:
            if key in ("at_context", "min_context") and isinstance(value, str):
                value = parse_count(value, key.replace("_", "-"))
            elif key == "min_concurrency" and isinstance(value, str):
                count, _, at = value.partition("@")  # "32@8k"
                value = int(count)
                if at:
                    out["at_context"] = parse_count(at, "at-context")
            elif key == "headroom" and isinstance(value, str):
                text = value.strip()
                value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
                if not 0 <= value < 1:
                    raise ValueError
            elif key in ("shared_prefix", "n") and isinstance(value, str):
                # shared-prefix 0 is "nothing shared", as the CLI's --shared-prefix 0 (cli/values.prefix_count)
                value = (0 if value.strip() == "0" else parse_count(value, "shared-prefix")) if key == "shared_prefix" \
                    else int(value)
            elif key == "max_num_seqs_reachable" and isinstance(value, str):
                value = value.strip().lower() in ("true", "yes", "1", "on")
        except (ValueError, KvplanError):
            raise _invalid(dep, "invalid-input", f"{v.spelled}: '{v.raw if v.raw is not None else v.value}' is "
                           "not a valid value", v.line) from None
        out.setdefault(key, value)
    return out


# ------------------------------------------------------------------------------------------- checks

def _check_one(dep: Deployment, spec: ModelSpec, gpu: Any, gpu_value: Value, settings: Settings,
               req: dict[str, Any], result: DeploymentResult, ctx: Context) -> None:
    from kvplan.parallel import tp_notes
    from kvplan.plan import max_batch

    add = result.findings.append
    tp, pp, dp = (int(dep.setting(k, 1)) for k in ("tp", "pp", "dp"))
    result.tp, result.pp, result.dp = tp, pp, dp  # as the file says (the engine's reading may differ: below)
    attention_dp = False
    mml_setting = dep.setting("max_model_len")
    auto = mml_setting == "auto"
    kv_dtype = str(dep.setting("kv_cache_dtype", "auto"))
    kwargs: dict[str, Any] = dict(
        gpu=None if gpu.origin == "command line" else gpu,
        gpu_memory=gpu.memory_bytes if gpu.origin == "command line" else None,
        tp=tp, pp=pp, dp=dp, engine=dep.engine,
        engine_version=dep.engine_version.value if dep.engine_version else None, kv_dtype=kv_dtype,
        max_model_len=None if auto else mml_setting, block_size=dep.setting("block_size"), settings=settings)
    serve = serve_flags(dep.engine)
    given = {k: v.value for k, v in dep.settings.items()}
    if serve is not None and serve.image_settings is not None and dep.image:  # what the engine's image implies
        given = {**serve.image_settings(dep.image), **given}
    sharing = True
    max_kv_tokens = None
    beams = 1
    try:
        if serve is not None and serve.speculation is not None:  # the engine's speculative flags (vLLM)
            kwargs.update(serve.speculation(given))
        if serve is not None and serve.reader is not None:  # offload tiers, prefix caching (the engine's rules)
            reading = serve.reader(given, kwargs["engine_version"])
            sharing = reading.sharing
            max_kv_tokens = reading.max_kv_tokens
            beams = reading.beam_width
            if reading.parallel:  # attention DP (SGLang, TensorRT-LLM), expert parallel: tp and dp as the engine runs
                over = dict(reading.parallel)
                kwargs.update(over)
                attention_dp = over.get("tp", tp) != tp
                tp, dp = int(over.get("tp", tp)), int(over.get("dp", dp))
            if reading.engine_options:
                kwargs["engine_options"] = reading.engine_options  # pairs: a plan's cache key; a dict in run()
            if reading.settings:
                kwargs["settings"] = settings = replace(settings, **dict(reading.settings))
            for r in reading.remarks:
                add(_finding(dep, r.severity, r.code, r.message, dep.line_of(r.setting)))  # type: ignore[arg-type]
        if serve is not None and serve.model_reader is not None:
            # the model as the engine loads it (--dtype, runtime --quantization) and whether it starts at all
            # with the max model length given (the engine's own rule: engines/<e>/flags.py read_model)
            spec, model_remarks = serve.model_reader(spec, given, kwargs["engine_version"])
            for r in model_remarks:
                add(_finding(dep, r.severity, r.code, r.message, dep.line_of(r.setting)))  # type: ignore[arg-type]
            if any(r.severity == "error" for r in model_remarks):
                return  # the engine refuses to start: nothing to plan
    except KvplanError as exc:
        add(_finding(dep, "error", "invalid-input", str(exc), dep.line_of(exc.field or ""), invalid_input=True))
        return
    req = _workload(dep, req, sharing, add)
    if beams > 1:
        req["beam_width"] = beams  # the engine runs every request with this many beams

    if ctx.calibration is not None:
        _calibrate(dep, spec, ctx, kwargs, result)
    plans = ctx._plans

    def run(*, points_only: bool = False, **over: Any) -> Any:
        args = {**kwargs, **over}
        key: tuple[Any, ...] = (spec, tuple(sorted(args.items())))
        found = plans.get(key)  # each lookup hashes the whole key again (the GPU, the settings): as few as can be
        if found is None and points_only:
            # the plan's own figures alone (a fix reads fits, tokens, concurrency): no budget interval, ~40 % of a
            # plan; a whole plan of the same settings, made already, serves as well
            key, args = (*key, "points only"), {**args, "interval": False}
            found = plans.get(key)
        if found is None:
            if "engine_options" in args:
                args["engine_options"] = dict(args["engine_options"])
            try:
                found = max_batch(spec, **args)
            except KvplanError as exc:
                found = exc
            plans[key] = found
        if isinstance(found, KvplanError):
            raise found
        return found

    # GPUs given vs used
    needed = tp * pp * dp
    layout = f"tp {tp} x pp {pp} x dp {dp}"
    if attention_dp:  # the file's tp holds the dp attention ranks
        layout = f"tp {tp * dp} x pp {pp} (dp {dp} attention ranks of tp {tp} within it)"
    if dep.gpu_count is not None:
        have = dep.gpu_count.value
        result.gpu_count = have
        if have < needed:
            add(_finding(dep, "error", "gpu-count", f"{layout} needs {needed} GPUs; "
                         f"{dep.gpu_count.spelled} gives {have}", dep.gpu_count.line, value=have, fits=needed))
        elif have > needed:
            add(_finding(dep, "warning", "gpu-count", f"{dep.gpu_count.spelled} gives {have} GPUs; {layout} "
                         f"uses {needed} (the others sit idle)", dep.gpu_count.line, value=have,
                         fits=needed))
    else:
        result.gpu_count = needed
    for note in tp_notes(spec, tp):
        if "exceeds" in note:
            add(_finding(dep, "warning", "tp-exceeds-kv-heads", note, dep.line_of("tp"), value=tp))
    try:
        plan = first = run()
        if max_kv_tokens is not None and plan.kv_cache_tokens > max_kv_tokens:
            at = dep.line_of(serve.config_files[0]) if serve is not None and serve.config_files else dep.line
            plan = capped_plan(dep, plan, max_kv_tokens, kwargs, run, add, at)
        if auto and not plan.fits and plan.max_model_len_fit > 0:
            plan = run(max_model_len=plan.max_model_len_fit)
    except KvplanError as exc:
        invalid = exc.field == "weights_bytes"
        add(_finding(dep, "error", "invalid-input" if invalid else "engine-refuses", str(exc),
                     dep.line_of("tp") if exc.field == "tp" else dep.line, invalid_input=invalid))
        return
    if auto:
        add(_finding(dep, "note", "max-model-len-auto", f"{dep.spelled('max_model_len')} auto: the engine picks "
                     f"{plan.max_model_len:,}", dep.line_of("max_model_len"), value="auto", fits=plan.max_model_len))
    _fill(result, plan)
    if dep.devices is not None:  # pinned GPUs another deployment may share: deploy/shared.py plans them together
        from kvplan.share import Tenant

        result.tenant = Tenant(result.name, dep.engine, kwargs["settings"], lambda chosen: run(settings=chosen))
    pinned = pinned_check(dep, plan.offload, dp)  # an offload tier's pinned pool vs the container's memory limit
    if pinned is not None:
        add(_finding(dep, "error", "host-memory", pinned[0], pinned[1], value=pinned[2], fits=pinned[3]))
    fp8 = _fp8_suggester(dep, plan, run)

    # 1. vLLM's start-up check: one sequence of max_model_len
    if not plan.fits and serve is not None and serve.short_pool is not None and not plan.misfit:
        # an engine that starts with a pool shorter than one request and caps requests instead (SGLang)
        capped = serve.short_pool(plan.kv_cache_tokens, plan.max_model_len, given)
        if capped is not None and capped.severity != "error":  # a refusal: the plan's own message says why
            add(_finding(dep, capped.severity, capped.code, capped.message,  # type: ignore[arg-type]
                         dep.line_of(capped.setting), value=plan.max_model_len, fits=max(plan.kv_cache_tokens - 1, 0),
                         suggestion=fp8(lambda p: p.fits, lambda p: f"{p.max_model_len_fit:,} fits with fp8")))
            longest = min(plan.max_model_len - 1, plan.kv_cache_tokens - 1)
            wanted = req.get("min_context")
            if isinstance(wanted, int) and wanted > longest:
                add(_finding(dep, "error", "min-context", f"{dep.spelled('min_context')} {wanted:,}: the engine caps "
                             f"requests at {longest:,} tokens here", dep.line_of("min_context"), value=wanted,
                             fits=longest))
            return
    if not plan.fits:
        default = "" if "max_model_len" in dep.settings else " (the model's limit: no max-model-len is set)"
        from kvplan.engines import get_engine

        engine = get_engine(dep.engine)
        unfit = engine.unfit
        if unfit and not dep.setting("fail_fast_on_attention_window_too_large"):
            default += f". {unfit}"
        # a plan of the same settings on another GPU, or with another KV dtype, tells where the weights overflow the
        # memory (``Engine.weights_overflow``): the deployment's own, unless it was planned again (a token cap, an
        # auto length), until the larger-GPU search has one of its own
        reference = first if plan is first else None

        def too_small(p: Any, total: int) -> bool:
            p = reference if p is None else p
            return p is not None and engine.weights_overflow(p, kwargs["settings"], total)

        # an fp8 KV cache leaves the weights and the budget as they are: where they overflow, it fits no better
        fp8_fits = None if too_small(None, plan.gpu_total_bytes) else \
            fp8(lambda p: p.fits, lambda p: f"{p.max_model_len_fit:,} fits with fp8")
        add(_finding(dep, "error", "does-not-fit", _unrepeated(plan.message, spec) + default,
                     dep.line_of("max_model_len"),
                     value=plan.max_model_len, fits=plan.max_model_len_fit, suggestion=fp8_fits))
        from kvplan.deploy.fixes import fixes

        result.fixes = fixes(plan, lambda **over: run(points_only=True, **over), serve, tp,
                             None if gpu.origin == "command line" else gpu, too_small)
        return
    # 1b. fits at kvplan's estimate, but not at the low end of where the engine's own budget may land
    if plan.interval is not None and not plan.interval["fits"][0]:
        low_kv = plan.interval["kv_cache_bytes"][0]
        # too few logs for a 90 % band: the low end is where kvplan's worst error on those logs would put it
        share = ("if kvplan errs as on the few logs it has" if plan.interval.get("few_logs")
                 else "for 9 in 10 deployments")
        add(_finding(dep, "warning", "may-not-fit", f"fits at kvplan's estimate of the KV memory "
                     f"({format_bytes(plan.per_gpu.kv_cache_bytes)} per GPU), not at the low end of where the engine's "
                     f"own figure lands {share} ({format_bytes(max(low_kv, 0))}; "
                     f"{plan.interval['basis']}):"
                     " its start-up log's 'Available KV cache memory' settles it (kvplan log --save, then --calibration)",
                     dep.line_of("max_model_len"), value=plan.max_model_len, fits=plan.max_model_len_fit))
    # 2. max_num_seqs sequences of max_model_len at once
    if "max_num_seqs" in dep.settings:
        seqs = dep.setting("max_num_seqs")
        # each data-parallel rank schedules its own requests (vLLM: one EngineCore per rank; SGLang's DP attention
        # divides --max-running-requests by dp, read into settings): compared rank by rank
        ranks = max(plan.dp, 1)
        per_rank = settings.max_num_seqs or seqs
        if per_rank * ranks > plan.max_batch:
            strict = bool(req.get("max_num_seqs_reachable"))
            each = f" on each of {ranks} data-parallel ranks" if ranks > 1 else ""
            given = f"{seqs}" if per_rank == seqs else f"{seqs} ({per_rank} per rank)"
            add(_finding(dep, "error" if strict else "warning", "max-num-seqs-unreachable",
                         f"{dep.spelled('max_num_seqs')} {given} sequences of {plan.max_model_len:,} tokens need "
                         f"{per_rank} x {format_bytes(plan.request_kv_bytes)} of KV per GPU{each}; "
                         f"{format_bytes(max(plan.per_gpu.kv_cache_bytes, 0))} available; "
                         f"{plan.max_batch // ranks} fit" + (" per rank" if ranks > 1 else ""),
                         dep.line_of("max_num_seqs"), value=seqs, fits=plan.max_batch // ranks * (seqs // per_rank),
                         suggestion=fp8(lambda p: p.max_batch >= per_rank * ranks,
                                        lambda p: f"{p.max_batch // ranks} fit per rank with fp8" if ranks > 1
                                        else f"{p.max_batch} fit with fp8") if strict else None))
    # 3. requirements
    failed = _requirement_checks(dep, plan, req, run, fp8, add, label="")
    headroom = req.get("headroom")
    if headroom and not failed:
        kv_left = int(plan.per_gpu.kv_cache_bytes * (1 - headroom))
        label = f"with {headroom:.0%} headroom ({format_bytes(max(kv_left, 0))} of KV per GPU): "
        if kv_left <= 0:
            add(_finding(dep, "error", "headroom", label + "no KV memory is left", dep.line_of("headroom"),
                         value=headroom))
            return
        tight_settings = replace(settings, kv_cache_memory_bytes=kv_left)

        def run_tight(**over: Any) -> Any:
            return run(**{"settings": tight_settings, **over})

        tight = run_tight(points_only=True)  # its fit and figures: the interval is the whole plan's
        if not tight.fits:
            add(_finding(dep, "error", "headroom", label + tight.message, dep.line_of("headroom"),
                         value=tight.max_model_len, fits=tight.max_model_len_fit))
        else:
            _requirement_checks(dep, tight, req, run_tight, lambda *a: None, add, label=label, code="headroom")


_QUANTIZED_HINT = ", a GPU with more memory, or a quantized checkpoint (fp8 / int4 weights)"  # plan.py's message


def _unrepeated(message: str, spec: ModelSpec) -> str:
    """A does-not-fit message that never proposes what the deployment already does: weights already quantized
    (a quantized checkpoint, or the engine's runtime --quantization) are not told to quantize."""
    from kvplan.budgets.runtime_weights import is_unquantized

    if _QUANTIZED_HINT in message and not is_unquantized(spec):
        return message.replace(_QUANTIZED_HINT, f" or a GPU with more memory (the weights are already "
                                                 f"{spec.weights_dtype})")
    return message


def _workload(dep: Deployment, req: dict[str, Any], sharing: bool, add: Any) -> dict[str, Any]:
    """The requirements' workload (shared prefix, sampling width) as the engine will serve it."""
    out = dict(req)
    prefix = out.get("shared_prefix")
    if prefix and not sharing:
        add(_finding(dep, "note", "prefix-caching", f"{dep.spelled('shared_prefix')} {prefix:,}: the engine does not "
                     "share prefixes here, so each request stores it: checked without sharing",
                     dep.line_of("shared_prefix")))
        out.pop("shared_prefix")
    n = out.pop("n", 1) or 1
    if n > 1 and sharing:
        out["n"] = n  # max_batch plans requests of n samples, each engine sharing their prompt its way
    elif n > 1:
        # vLLM's n children share their prompt only through prefix caching (ParallelSampling): with it off,
        # a request of n samples is n independent sequences
        out["unshared_n"] = n
        add(_finding(dep, "note", "prefix-caching", f"{dep.spelled('n')} {n}: the engine does not share prefixes "
                     "here, so each sample stores the prompt: min-concurrency is checked as n sequences per request",
                     dep.line_of("n")))
    return out


def _calibrate(dep: Deployment, spec: ModelSpec, ctx: Context, kwargs: dict[str, Any], result: DeploymentResult) -> None:
    """Measured items from --calibration where it matches this deployment (kvplan.logs.calibration)."""
    from kvplan.calibrate import calibrate

    mml = kwargs["max_model_len"]
    try:
        c = calibrate(ctx.calibration, spec, gpu=kwargs["gpu"], gpu_memory=kwargs["gpu_memory"], tp=kwargs["tp"],
                      pp=kwargs["pp"], engine=kwargs["engine"], engine_version=kwargs["engine_version"],
                      kv_dtype=kwargs["kv_dtype"], max_model_len=mml if isinstance(mml, int) else None,
                      settings=kwargs["settings"], catalog=ctx.catalog_file)
    except KvplanError as exc:
        result.findings.append(_finding(dep, "note", "calibration-unused", f"calibration not used: {exc}".replace(
            "--calibration: ", ""), dep.line))
        return
    kwargs.update(settings=c.settings, engine_version=c.engine_version)
    if c.gpu_memory:
        kwargs.update(gpu=None, gpu_memory=c.gpu_memory)
    result.findings.append(_finding(dep, "note", "calibration", "; ".join(n.removeprefix("calibration: ")
                                                                          for n in c.notes), dep.line))
