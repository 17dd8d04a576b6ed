"""``verify --activation``: one real transformers forward, its peak memory against kvplan's hf estimate.

The model is built from its config.json with transformers on the meta device (no memory), cast to
the checkpoint dtype, materialized on the device with ``to_empty`` and filled with random values
(weights N(0, 0.02), rotary frequencies recomputed so positions stay finite), then one
``forward(input_ids [batch, tokens], use_cache=True)`` runs under ``torch.inference_mode`` with
``logits_to_keep=1`` where the model takes it (what ``generate``'s prefill passes: logits of the last
position only). Measured on CUDA:

- weights: ``memory_allocated`` growth while materializing;
- cache: the bytes of the tensors the returned cache holds (compared with ``kvplan estimate
  --engine hf`` for the installed transformers release: an exact check of the cache rule);
- BLAS workspaces: before the forward, two small matrix products on the device (without and with a bias)
  make torch allocate the workspaces of the current handle and stream through the caching allocator, once a
  process (``CublasHandlePool.cpp``: cuBLAS 32 MiB on sm_90, 8 MiB + 128 KiB elsewhere,
  ``CUBLAS_WORKSPACE_CONFIG``; cuBLASLt 1 MiB, ``CUBLASLT_WORKSPACE_SIZE``; 33 MiB on an H200). Their size is
  reported on its own (``blas_workspace_bytes``) and kept out of the peak, so a forward measures the same in a
  fresh process as after other GPU work (the second H200 session found the 32 MiB cuBLAS workspace in a
  standalone ``verify --activation`` and not in the matrix, which had already multiplied);
- peak: ``max_memory_allocated`` during the forward above weights and inputs; the activation
  peak is that peak less the cache's storage (the widest moment of the pass, logits included). The
  cache is subtracted whole, as it stands at the end of the pass: what a budget of weights +
  activation + KV must leave room for.

kvplan's estimate (``kvplan.engines.hf.activation``, the hf budget's activation item) is computed for
``batch`` sequences of ``tokens`` tokens with ``batch`` logit rows; its assumptions (the SDPA kernel CUDA
picks, a model type it was not traced for) are among the notes. On the CPU torch keeps no allocator
statistics: the peak is the storages the forward makes, traced op by op (``kvplan.verify.live``: what
``max_memory_allocated`` would show less the allocator's rounding and kernel workspaces). A model whose
weights, cache and estimated activation exceed the free memory is skipped, and the result says so.
transformers is optional: a one-line error when it is missing.
"""

from __future__ import annotations

import gc
import os
from typing import Any

from kvplan.engines import LIBRARY_ENGINE, get_engine
from kvplan.record import dataclass, field
from kvplan.spec import ModelSpec
from kvplan.verify.errors import VerifyError

#: Bounded time on the CPU: the forward is a code-path check there, not a measurement.
CPU_MAX_TOKENS = 16384
CPU_MAX_WEIGHTS = 1 << 30
#: Keep this share of free memory for the allocator's rounding and the kernels' workspaces.
HEADROOM = 0.95


@dataclass(frozen=True)
class ActivationCheck:
    model_id: str
    device: str
    transformers_version: str
    attn_implementation: str
    batch: int
    tokens: int
    dtype: str
    weights_bytes: int
    """What materializing the model took (parameter and buffer storage on the CPU)."""
    cache_bytes: int
    """numel x element size of the floating-point tensors of the cache the forward returned."""
    cache_storage_bytes: int
    """The distinct storages behind the cache's tensors: the memory it keeps alive."""
    predicted_cache_bytes: int
    """kvplan estimate --engine hf (this transformers release) for batch x tokens."""
    peak_bytes: int | None
    """max_memory_allocated during the forward above weights and inputs (CUDA); the live storages' peak,
    traced op by op (elsewhere)."""
    activation_bytes: int | None
    """peak_bytes less the cache's storage: the activation peak."""
    predicted_activation_bytes: int
    predicted_formula: str
    skipped: str | None = None
    """Why the forward did not run (does not fit the device); the byte fields are then 0 / None."""
    notes: tuple[str, ...] = field(default=())
    blas_workspace_bytes: int | None = None
    """What this process's first matrix products on the device allocated (the cuBLAS and cuBLASLt workspaces),
    measured before the forward and not in its peak; 0 where earlier products had allocated them (CUDA only)."""

    @property
    def cache_exact(self) -> bool:
        return self.skipped is None and self.cache_bytes == self.predicted_cache_bytes

    @property
    def activation_error_pct(self) -> float | None:
        if self.activation_bytes is None or not self.activation_bytes:
            return None
        return round(100.0 * (self.predicted_activation_bytes - self.activation_bytes) / self.activation_bytes, 4)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_id, "device": self.device, "transformers_version": self.transformers_version,
            "attn_implementation": self.attn_implementation, "batch": self.batch, "tokens": self.tokens,
            "dtype": self.dtype, "skipped": self.skipped, "weights_bytes": self.weights_bytes,
            "cache_bytes": self.cache_bytes, "cache_storage_bytes": self.cache_storage_bytes,
            "predicted_cache_bytes": self.predicted_cache_bytes,
            "cache_exact": self.cache_exact, "peak_bytes": self.peak_bytes, "activation_bytes": self.activation_bytes,
            "blas_workspace_bytes": self.blas_workspace_bytes,
            "predicted_activation_bytes": self.predicted_activation_bytes,
            "predicted_formula": self.predicted_formula, "activation_error_pct": self.activation_error_pct,
            "notes": list(self.notes),
        }


def import_transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise VerifyError("--activation builds the model with transformers, which is not installed: "
                          "pip install transformers") from None
    return transformers


def load_config(model: str, spec: ModelSpec) -> Any:
    """The transformers config: from a local config.json or model directory, else AutoConfig's own
    lookup of the Hub id (its cache, or the Hub)."""
    tf = import_transformers()
    path = os.path.expanduser(model)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        if os.path.isfile(path):
            if path.endswith((".yaml", ".yml")):
                raise VerifyError(f"--activation needs a config.json, not a kvplan spec ({model})")
            from kvplan.safe_io import read_json_object

            data = read_json_object(path)  # bounded: size, depth, integer length; no pipes or devices
            kind = data.pop("model_type", None)
            if not kind:
                raise VerifyError(f"--activation: {model} has no model_type")
            return tf.AutoConfig.for_model(kind, **data)
        return tf.AutoConfig.from_pretrained(spec.source if spec.source not in (None, "bundled") else spec.id)
    except VerifyError:
        raise
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a config it cannot use
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise VerifyError(f"--activation: transformers cannot build a config for '{model}' ({first}): pass a "
                          "config.json path or a model directory") from None


def measure_activation(model: str | ModelSpec, *, batch: int = 1, tokens: int = 4096, device: str | None = None,
                       config: Any = None) -> ActivationCheck:
    """Build ``model`` from its config with random weights on ``device`` and run one forward."""
    from kvplan.estimate import estimate
    from kvplan.verify import allocate as al

    if batch <= 0 or tokens <= 0:
        raise VerifyError(f"--activation: --batch {batch} and --context {tokens} must be positive")
    spec, name = (model, model.id) if isinstance(model, ModelSpec) else (_load(model), model)
    tf = import_transformers()
    torch = al.import_torch()
    dev = al.resolve_device(device)
    cfg = config if config is not None else load_config(name, spec)
    version = ".".join(tf.__version__.split(".")[:2])
    predicted_cache = estimate(spec, contexts=[tokens], batches=[batch], engine=LIBRARY_ENGINE,
                               engine_version=version).rows[0].kv_bytes
    predicted = get_engine(LIBRARY_ENGINE).prefill_activation(spec, batch, tokens)  # type: ignore[attr-defined]
    act, how = predicted.bytes, predicted.formula
    dtype = getattr(torch, spec.dtype)
    notes: list[str] = list(predicted.assumptions)

    net, attn = _build(tf, torch, cfg, spec.id)
    if attn != "sdpa":
        notes.append(f"{spec.id} has no sdpa attention in transformers {tf.__version__}: {attn} attention, whose "
                     "[batch, heads, tokens, tokens] scores are part of the peak")
    net = net.to(dtype)
    base = dict(model_id=spec.id, device=al._where(dev), transformers_version=tf.__version__,
                attn_implementation=attn, batch=batch, tokens=tokens, dtype=spec.dtype,
                predicted_cache_bytes=predicted_cache, predicted_activation_bytes=act, predicted_formula=how)
    weights = sum(t.numel() * t.element_size() for t in (*net.parameters(), *net.buffers()))
    skip = _too_big(dev, weights, predicted_cache, act, batch * tokens)
    if skip is not None:
        del net
        return ActivationCheck(**base, weights_bytes=weights, cache_bytes=0, cache_storage_bytes=0, peak_bytes=None, activation_bytes=None,
                               skipped=skip, notes=tuple(notes))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
    start = al.snapshot(dev)
    out = None
    workspace: int | None = None
    try:
        net.to_empty(device=dev)
        _randomize(torch, net)
        after_weights = al.snapshot(dev)
        # both None off CUDA (snapshot), both numbers on it
        measured_weights = (after_weights.allocated - start.allocated
                            if start.allocated is not None and after_weights.allocated is not None else weights)
        ids = torch.randint(0, int(getattr(cfg, "vocab_size", None) or 1000), (batch, tokens), device=dev)
        kwargs = _forward_kwargs(net, ids, notes)
        if dev.type == "cuda":
            workspace = _warm_blas(torch, dev, net)
        out, peak = _forward_peak(torch, dev, net, kwargs, ids)
        # the output's cache: ``past_key_values`` until transformers 5.2x, ``cache`` since (5.24)
        cache = getattr(out, "past_key_values", None)
        cache = cache if cache is not None else getattr(out, "cache", None)
        held, storage = cache_bytes(torch, cache) if cache is not None else (0, 0)
    except al._oom_types(torch):
        out = None
        skip = f"out of memory on {al._where(dev)} during the forward: skipped (everything freed)"
        measured_weights, held, storage, peak = weights, 0, 0, None
    finally:
        out = None
        del net
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    notes += _measured_notes(dev, held, storage, skip)
    if workspace:
        notes.append(f"the process's first matrix products on {al._where(dev)} allocated {workspace:,} B (the cuBLAS "
                     "and cuBLASLt workspaces, held once a process): measured before the forward, not in its peak")
    return ActivationCheck(**base, weights_bytes=measured_weights, cache_bytes=held, cache_storage_bytes=storage,
                           peak_bytes=peak, activation_bytes=None if peak is None else peak - storage, skipped=skip,
                           notes=tuple(notes), blas_workspace_bytes=workspace)


def _forward_peak(torch: Any, dev: Any, net: Any, kwargs: dict[str, Any], ids: Any) -> tuple[Any, int]:
    """The forward's output and its peak above weights and inputs: ``max_memory_allocated`` on CUDA; elsewhere,
    with no allocator statistics, the storages it makes, traced op by op."""
    from kvplan.verify import allocate as al
    from kvplan.verify.live import trace

    if dev.type != "cuda":
        with torch.inference_mode():
            out, live = trace(torch, lambda: net(**kwargs), (*net.parameters(), *net.buffers(), ids))
        return out, live.bytes
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    before = al.snapshot(dev)
    with torch.inference_mode():
        out = net(**kwargs)
    torch.cuda.synchronize(dev)
    # the ignore: a snapshot's allocated is None off CUDA only
    return out, int(torch.cuda.max_memory_allocated(dev)) - int(before.allocated)  # type: ignore[arg-type]


def _warm_blas(torch: Any, dev: Any, net: Any) -> int:
    """Two small products in the model's dtype, without and with a bias (the cuBLAS and cuBLASLt paths), so the
    handle's workspaces exist before the peak is taken: the bytes they allocated (0 if they existed)."""
    dtype = next(net.parameters()).dtype
    before = torch.cuda.memory_allocated(dev)
    x = torch.ones(8, 8, dtype=dtype, device=dev)
    torch.nn.functional.linear(x, x)
    torch.nn.functional.linear(x, x, x[0])
    del x  # the inputs and products are freed; the workspace stays with the handle
    torch.cuda.synchronize(dev)
    return int(torch.cuda.memory_allocated(dev)) - int(before)


def _load(model: str) -> ModelSpec:
    from kvplan.sources.resolve import load_model

    return load_model(model)


def _too_big(dev: Any, weights: int, cache: int, act: int, tokens: int) -> str | None:
    """Why the forward is skipped: more than the device's free memory (with headroom), or past the CPU's bounds."""
    from kvplan.verify import allocate as al

    free = al.free_bytes(dev)
    if free is not None and weights + cache + act > HEADROOM * free:
        return (f"needs {_fmt(weights)} of weights + {_fmt(cache)} of cache + ~{_fmt(act)} of "
                f"activation, {_fmt(free)} is free on {al._where(dev)}: skipped")
    if dev.type == "cpu" and (weights > CPU_MAX_WEIGHTS or tokens > CPU_MAX_TOKENS):
        return (f"on the CPU the forward is a code-path check: at most {_fmt(CPU_MAX_WEIGHTS)} of weights and "
                f"{CPU_MAX_TOKENS:,} tokens (this run: {_fmt(weights)}, {tokens:,}); use a GPU: skipped")
    return None


def _forward_kwargs(net: Any, ids: Any, notes: list[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": True}
    if _takes(net, "logits_to_keep"):
        kwargs["logits_to_keep"] = 1
    else:
        notes.append("this model's forward has no logits_to_keep: logits of every position are computed")
    return kwargs


def _measured_notes(dev: Any, held: int, storage: int, skip: str | None) -> list[str]:
    notes = []
    if dev.type != "cuda" and skip is None:
        notes.append(f"on {dev.type} torch keeps no allocator statistics: the peak is the storages the forward made, "
                     "traced op by op (kvplan.verify.live; no allocator rounding, no kernel workspaces)")
    if storage > held and skip is None:
        notes.append(f"the cache's tensors hold {held:,} B but keep {storage:,} B of storage alive: transformers "
                     "slices sliding-window layers as views of the last concatenation (DynamicSlidingWindowLayer."
                     "update), so a layer keeps the whole prompt after prefill and its window after each decode step")
    return notes


def _build(tf: Any, torch: Any, cfg: Any, name: str) -> tuple[Any, str]:
    """The model on the meta device: sdpa attention (no [tokens x tokens] scores), else eager."""
    last = ""
    for attn in ("sdpa", "eager"):
        try:
            with torch.device("meta"):
                return tf.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn), attn
        except Exception as exc:  # transformers: ValueError for an unsupported attention, others for configs
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
            if "attention" not in last.lower():
                break
    raise VerifyError(f"--activation: transformers cannot build {name} from its config ({last})")


def _randomize(torch: Any, net: Any) -> None:
    """Random weights; rotary inverse frequencies recomputed (to_empty leaves buffers uninitialized)."""
    with torch.no_grad():
        for p in net.parameters():
            if p.is_floating_point():
                p.normal_(0.0, 0.02)
            else:
                p.zero_()
        for name, b in net.named_buffers():
            if name.endswith("inv_freq") and b.dim() == 1:
                n = b.numel()
                b.copy_(1.0 / (10000.0 ** (torch.arange(n, device=b.device, dtype=torch.float32) / n)))
            elif b.is_floating_point():
                b.zero_()
            else:
                b.zero_()


def _takes(net: Any, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(net.forward).parameters
    except (TypeError, ValueError):
        return False


def cache_bytes(torch: Any, cache: Any) -> tuple[int, int]:
    """(view bytes, storage bytes) of the tensors reachable from a transformers cache object.

    View bytes: numel x element size of its floating-point tensors (the K, V and state the cache
    rule describes). Storage bytes: every distinct storage behind any of its tensors -- what memory
    really holds (a sliced view keeps the storage it was cut from alive)."""
    tensors: list[Any] = []
    # walk the objects of the library's own classes, not whatever they point at
    _collect(torch, cache, tensors, 0, set(), get_engine(LIBRARY_ENGINE).library)  # type: ignore[attr-defined]
    views = sum(t.numel() * t.element_size() for t in tensors if t.is_floating_point())
    storages: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = int(storage.nbytes())
    return int(views), sum(storages.values())


def _collect(torch: Any, obj: Any, out: list[Any], depth: int, seen: set[int], package: str) -> None:
    if depth > 6 or obj is None or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        if obj.device.type != "meta":
            out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _collect(torch, x, out, depth + 1, seen, package)
    elif isinstance(obj, dict):
        for x in obj.values():
            _collect(torch, x, out, depth + 1, seen, package)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith(package):
        for x in vars(obj).values():
            _collect(torch, x, out, depth + 1, seen, package)


def _fmt(n: int) -> str:
    from kvplan.units import format_bytes

    return format_bytes(n)
