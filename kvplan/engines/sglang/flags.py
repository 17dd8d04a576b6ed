"""``python -m sglang.launch_server`` flags (``python/sglang/srt/server_args.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.engines.serve import ServeFlags, ServeReading, ServeRemark, shown
from kvplan.errors import UsageError

# --speculative-algorithm -> kvplan's method (``SpeculativeAlgorithm``; NEXTN is SGLang's MTP)
_METHODS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "STANDALONE": "draft_model", "NGRAM": "ngram"}
_DRAFTLESS = frozenset({"mtp", "ngram"})


def read_serve(settings: Mapping[str, Any], version: str | None) -> ServeReading:
    """The hierarchical cache, the radix cache and speculation from the settings the flags gave.

    ``ServerArgs``: ``--enable-hierarchical-cache`` (store_true) turns the host pool on; ``--hicache-ratio``
    (float, default 2.0) and ``--hicache-size`` (int GB per rank, 0 = use the ratio) size it and do nothing
    without it. ``--disable-radix-cache`` turns prefix sharing off. ``--speculative-algorithm``: planned
    (``read_speculation``); a tree wider than one (``--speculative-eagle-topk`` > 1) or steps left to
    SGLang's choice are said. ``--cpu-offload-gb`` (an int, GiB of weights per GPU in host memory:
    ``OffloaderV1(cpu_offload_max_bytes=int(gb x 1024**3))``, ``offloader.py``) is planned by the budget.
    """
    options: dict[str, Any] = {}
    remarks: list[ServeRemark] = []
    sizing = [k for k in ("hicache_ratio", "hicache_size") if k in settings]
    if settings.get("enable_hierarchical_cache"):
        size = settings.get("hicache_size")
        if size:  # 0 (the default) means: size the pool by the ratio
            options["hicache_size_gb"] = float(size)
        else:
            options["hicache_ratio"] = float(settings.get("hicache_ratio", 2.0))
    elif sizing:
        remarks.append(ServeRemark("note", "not-read", f"--{sizing[0].replace('_', '-')} without "
                                   "--enable-hierarchical-cache: SGLang keeps no host KV pool", sizing[0]))
    sharing = not settings.get("disable_radix_cache")
    if not sharing:
        remarks.append(ServeRemark("note", "prefix-caching", "--disable-radix-cache: requests share no KV, a shared "
                                   "prefix is stored once per request", "disable_radix_cache"))
    remarks.extend(speculation_remarks(settings))
    budget: dict[str, Any] = {}
    gb = _whole_gib(settings.get("cpu_offload_gb"))
    if gb:
        budget["cpu_offload_bytes"] = gb * 1024**3
    return ServeReading(engine_options=tuple(sorted(options.items())), settings=tuple(sorted(budget.items())),
                        sharing=sharing, remarks=tuple(remarks))


def _whole_gib(value: Any) -> int | None:
    """``--cpu-offload-gb``: SGLang's argument is an int (``ServerArgs.cpu_offload_gb``)."""
    if value is None:
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        number = -1.0
    if not (number >= 0 and number.is_integer() and number < 1 << 20):
        raise UsageError(f"--cpu-offload-gb {shown(str(value), quote=False)}: SGLang takes a whole number of GiB",
                         field="cpu_offload_gb")
    return int(number)


def _int(settings: Mapping[str, Any], key: str) -> int | None:
    value = settings.get(key)
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise UsageError(f"--{key.replace('_', '-')} {shown(str(value), quote=False)}: not an integer",
                         field=key) from None


def read_speculation(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``max_batch``'s speculative keywords from ``--speculative-algorithm`` and its flags ({} without it).

    ``--speculative-num-steps`` is kvplan's num_speculative_tokens (the draft depth; topk 1 makes the
    draft-token count steps + 1, ``_handle_eagle_family``). Unset: NEXTN leaves SGLang's per-model choice to
    ``sglang/speculative.py``; STANDALONE's choice is always 3 steps; EAGLE / EAGLE3 are planned at 3 steps,
    SGLang's choice for every target but Llama and Grok (said by ``speculation_remarks``). NGRAM verifies
    ``--speculative-num-draft-tokens`` (12 by default, ``_handle_ngram``)."""
    algorithm = settings.get("speculative_algorithm")
    if algorithm is None:
        return {}
    name = str(algorithm).strip().upper()
    if name not in _METHODS:
        raise UsageError(f"--speculative-algorithm {shown(str(algorithm), quote=False)}: kvplan plans "
                         f"{', '.join(_METHODS)}",
                         field="speculative_algorithm")
    method = _METHODS[name]
    steps = _int(settings, "speculative_num_steps")
    if method == "ngram":
        steps = _int(settings, "speculative_num_draft_tokens") or 12
    elif steps is None:
        for key in ("speculative_eagle_topk", "speculative_num_draft_tokens"):
            if settings.get(key) is not None:  # _handle_eagle_family asserts both unset without the steps
                raise UsageError(f"SGLang refuses --{key.replace('_', '-')} without --speculative-num-steps",
                                 field=key)
        if method != "mtp":
            steps = 3
    model = settings.get("speculative_draft_model_path")
    return {"speculative_method": method, "num_speculative_tokens": steps,
            "speculative_model": None if method in _DRAFTLESS else model}


def speculation_remarks(settings: Mapping[str, Any]) -> list[ServeRemark]:
    """What the plan of ``read_speculation`` leaves out, said."""
    algorithm = str(settings.get("speculative_algorithm") or "").strip().upper()
    if algorithm not in _METHODS or algorithm == "NGRAM":
        return []
    remarks = []
    steps = _int(settings, "speculative_num_steps")
    topk = _int(settings, "speculative_eagle_topk")
    draft_tokens = _int(settings, "speculative_num_draft_tokens")
    if steps is None and algorithm in ("EAGLE", "EAGLE3"):
        remarks.append(ServeRemark("warning", "speculation-not-planned",
                                   "no --speculative-num-steps: planned at SGLang's choice for most targets (3 steps, "
                                   "topk 1, 4 draft tokens); for Llama and Grok targets SGLang picks 5 steps, topk 4, "
                                   "8 draft tokens (20 slots a request), so give the flags to plan them",
                                   "speculative_algorithm"))
    if topk is not None and topk > 1 and steps is not None:
        slots = max(steps * topk, draft_tokens or 0)
        remarks.append(ServeRemark("warning", "speculation-not-planned",
                                   f"--speculative-eagle-topk {topk}: each request holds max(steps x topk, draft "
                                   f"tokens) = {slots} slots beyond its context; the plan counts topk 1 ({steps + 1}), "
                                   "which is optimistic", "speculative_eagle_topk"))
    return remarks


SERVE = ServeFlags(
    engine="sglang",
    modules=("sglang.launch_server",),
    flags=(
        ("--model-path", "model"), ("--model", "model"), ("--tp-size", "tp"), ("--tp", "tp"),
        ("--tensor-parallel-size", "tp"), ("--pp-size", "pp"), ("--pipeline-parallel-size", "pp"),
        ("--dp-size", "dp"), ("--dp", "dp"), ("--data-parallel-size", "dp"), ("--context-length", "max_model_len"),
        ("--max-running-requests", "max_num_seqs"), ("--mem-fraction-static", "mem_fraction_static"),
        ("--kv-cache-dtype", "kv_cache_dtype"), ("--chunked-prefill-size", "max_num_batched_tokens"),
        ("--page-size", "block_size"), ("--disable-cuda-graph", "enforce_eager"), ("--config", "config"),
        ("--enable-hierarchical-cache", "enable_hierarchical_cache"), ("--hicache-ratio", "hicache_ratio"),
        ("--hicache-size", "hicache_size"), ("--disable-radix-cache", "disable_radix_cache"),
        ("--speculative-algorithm", "speculative_algorithm"),
        ("--speculative-num-draft-tokens", "speculative_num_draft_tokens"),
        ("--speculative-draft-model-path", "speculative_draft_model_path"), ("--cpu-offload-gb", "cpu_offload_gb"),
        ("--speculative-num-steps", "speculative_num_steps"), ("--speculative-eagle-topk", "speculative_eagle_topk"),
    ),
    booleans=("enforce_eager", "enable_hierarchical_cache", "disable_radix_cache"),
    floats=("hicache_ratio",),
    fp8_kv_flag="--kv-cache-dtype fp8_e4m3",
    speculation=read_speculation,
    reader=read_serve,
)
