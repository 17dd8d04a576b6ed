"""LMCache's local CPU and local disk tiers under vLLM (``LMCacheConnectorV1``).

Read from LMCache 0.5.6 (the PyPI wheel, ``lmcache/``):

- Settings (``v1/config.py`` ``_CONFIG_DEFINITIONS``): ``chunk_size`` 256, ``local_cpu`` true,
  ``max_local_cpu_size`` 5.0, ``local_disk`` none, ``max_local_disk_size`` 0.0, ``save_unfull_chunk`` false,
  ``save_decode_cache`` false. ``v1/config_base.py``: the environment variable of each is ``LMCACHE_`` + its
  name in capitals; ``LMCACHE_CONFIG_FILE`` names a YAML file of the same names, and the environment
  overrides the file (``integration/vllm/utils.py`` ``lmcache_get_or_create_config``). Then
  ``vllm_v1_adapter.py`` ``_apply_extra_config`` lets ``"lmcache.NAME"`` keys of vLLM's
  ``kv_connector_extra_config`` override both. ``enable_blending`` forces ``save_unfull_chunk``
  (``_validate_config``).
- Sizes are GiB: ``LocalCPUBackend.initialize_allocator`` pins ``int(max_local_cpu_size * 1024**3)`` bytes
  and ``LocalDiskBackend.__init__`` caps the disk at ``int(max_local_disk_size * 1024**3)``, per rank.
- One chunk (``v1/metadata.py`` ``LMCacheMetadata.get_shapes``): ``[kv_size, layers, chunk_size, heads x
  head_size]`` of the rank's own cache (``kv_size`` 2 for K and V, 1 for the MLA latent), in the cache's
  dtype (``KV_2LTD`` / ``KV_MLA_FMT``): the rank's bytes per token times ``chunk_size``. The pinned pool
  (``MixedMemoryAllocator`` -> ``memory_management._allocate_cpu_memory``, allocated whole when the engine
  starts) hands out chunks rounded up to 4,096 B (``AddressManager.compute_aligned_size``); the disk
  counts the same physical size (``LocalDiskBackend``: ``memory_obj.get_physical_size()``).
- Which tokens are stored (``vllm_v1_adapter.py`` ``ReqMeta.from_request_tracker``): the prompt, in whole
  chunks unless ``save_unfull_chunk`` (``input_token_len // chunk_size * chunk_size``); decoded tokens only
  with ``save_decode_cache``.
- Every rank stores its own shard, except MLA: ``save_only_first_rank`` (default: on for MLA;
  ``cache_engine.py`` ``LMCacheEngine.post_init``) makes rank 0 alone create the storage (and its pinned
  pool); it broadcasts loaded chunks to the other ranks.
- ``StorageManager.batched_put`` writes each chunk to every backend: the disk holds copies of what the CPU
  tier holds, not other tokens beside them. ``LocalDiskBackend`` asserts a ``LocalCPUBackend``.
- vLLM's ``--kv-offloading-backend lmcache`` (``vllm/config/vllm.py`` ``_post_init_kv_transfer_config``)
  sets ``kv_connector_extra_config = {"lmcache.local_cpu": True, "lmcache.max_local_cpu_size":
  size / (tp x pp)}``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from collections.abc import Callable, Iterable, Mapping, Sequence

from kvplan.engines.layout import CacheLayout, EngineOptions
from kvplan.engines.offload import DiskTier, OffloadTier, find_link, uniform_token_bytes
from kvplan.engines.protocol import Demand
from kvplan.engines.serve_format import shown
from kvplan.errors import UsageError
from kvplan.record import dataclass, fields
from kvplan.spec import MLA

LMCACHE_VERSION = "0.5.6"
GIB = 1 << 30
ALIGN_BYTES = 4096  # memory_management.py AddressManager.ALIGN_BYTES
ENV_PREFIX = "LMCACHE_"
# KV dtypes whose vLLM pages hold nothing but the K and V elements (LMCache copies the registered tensors)
PLAIN_DTYPES = frozenset({"float32", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"})
# every other setting given is named in the notes (remote, P2P, GDS and layerwise paths, and
# LMCACHE_FORCE_SKIP_SAVE, which vllm_v1_adapter.py reads to store nothing, change what is stored)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1")  # config_base.py _to_bool


def env_value(raw: Any) -> Any:
    """An ``LMCACHE_*`` variable's text as LMCache reads it (``v1/config_base.py`` ``_parse_quoted_string``, called
    on every environment value by ``_from_env`` and ``v1/config.py`` ``_update_config_from_env``): surrounding
    whitespace dropped, and a value wrapped in matching quotes (``"512"``, as a compose list or a k8s value
    may carry them) read as a Python string literal, or, where that fails, with just the outer quotes cut."""
    if not isinstance(raw, str) or not raw:
        return raw
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in ("'", '"'):
        if len(text) > 4096:  # no setting is this long: spare Python's parser a hostile expression ('"a"+"a"+...')
            return text[1:-1]
        # ast here, not at import: a quoted setting is rare, and ast costs start-up a few ms
        import ast

        try:
            literal = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text[1:-1]
        if isinstance(literal, str):
            return literal
    return text


def _local_disk(value: Any) -> str | None:
    """config_base.py ``_parse_local_disk``: comma-separated paths, ``file://`` stripped."""
    if value is None:
        return None
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    paths = [p[len("file://"):] if p.startswith("file://") else p for p in parts]
    return ",".join(paths) or None


@dataclass(frozen=True)
class LMCacheSettings:
    chunk_size: int = 256
    local_cpu: bool = True
    max_local_cpu_size: float = 5.0
    """GiB of pinned host memory per rank."""
    local_disk: str | None = None
    max_local_disk_size: float = 0.0
    """GiB of disk per rank."""
    save_unfull_chunk: bool = False
    save_decode_cache: bool = False
    enable_blending: bool = False
    save_only_first_rank: bool | None = None
    """extra_config['save_only_first_rank']; None: LMCache's default (on for MLA)."""
    first_rank_max_local_cpu_size: float | None = None
    given: tuple[str, ...] = ()
    """The names the deployment set (the rest are LMCache's defaults)."""
    ignored: tuple[str, ...] = ()
    """Names given that kvplan does not plan."""


_CONVERT: dict[str, Callable[[Any], object]] = {"chunk_size": int, "local_cpu": _to_bool, "max_local_cpu_size": float, "local_disk": _local_disk,
            "max_local_disk_size": float, "save_unfull_chunk": _to_bool, "save_decode_cache": _to_bool,
            "enable_blending": _to_bool}


MAX_CHUNK_TOKENS = 1 << 24  # LMCache's default is 256; a chunk of 16M tokens is past any model's context
MAX_GIB = 1 << 20  # 1 PiB per rank: past any host; a bound keeps 1e308 out of int(size x 2^30)
_WHOLE = frozenset({"chunk_size"})
_SIZES = frozenset({"max_local_cpu_size", "max_local_disk_size", "first_rank_max_local_cpu_size"})


def _refuse(key: str, raw: Any, why: str) -> UsageError:
    return UsageError(f"LMCache {key} {shown(raw)}: {why}", field="lmcache")


def _checked(key: str, raw: Any, converted: Any) -> Any:
    """kvplan's rules on top of LMCache's converters (``int``, ``float``), which read ``true`` as 1, ``1.5`` as a
    chunk of 1 and ``1e308`` GiB as a size: a boolean is not a number, a chunk is a whole count, and both have
    a bound (kvplan multiplies them into byte counts)."""
    if key not in _WHOLE and key not in _SIZES:
        return converted
    if isinstance(raw, bool):
        raise _refuse(key, raw, "a boolean, not " + ("an integer" if key in _WHOLE else "a size in GiB"))
    if key in _WHOLE:
        if isinstance(raw, float) and not raw.is_integer():
            raise _refuse(key, raw, "not a whole number of tokens")
        if not 1 <= converted <= MAX_CHUNK_TOKENS:
            raise _refuse(key, raw, f"must be a whole number of tokens from 1 to {MAX_CHUNK_TOKENS:,}")
    elif not 0 <= converted <= MAX_GIB:  # nan fails both comparisons
        raise _refuse(key, raw, f"must be a size in GiB from 0 to {MAX_GIB:,}")
    return converted


def _convert(key: str, raw: Any) -> Any:
    """LMCache's converter, then kvplan's rules; a UsageError naming the setting where either refuses."""
    try:
        converted = _CONVERT[key](raw) if key in _CONVERT else float(raw)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        raise _refuse(key, raw, "not a valid value") from None
    return _checked(key, raw, converted)


def _extra_config(raw: Any) -> Mapping[str, Any]:
    """LMCache's ``extra_config`` (a JSON object in an environment variable, or a YAML mapping), read with
    ``kvplan.safe_io``'s bounds on depth and integer length."""
    from kvplan.errors import KvplanError
    from kvplan.safe_io import parse_json

    extra = raw
    if isinstance(raw, str):
        try:
            extra = parse_json(raw, "extra_config") if raw.strip() else {}
        except KvplanError as exc:
            detail = str(exc).removeprefix("extra_config").lstrip(":").strip()
            raise UsageError(f"LMCache extra_config {shown(raw)}: {detail}", field="lmcache") from None
    if not isinstance(extra, Mapping):
        raise UsageError("LMCache extra_config: not a JSON object", field="lmcache")
    return extra


def settings(value: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> LMCacheSettings:
    """LMCache's settings from ``{name: value}`` (LMCache's config names; values as typed or as the text of
    an environment variable), refusing a value LMCache would not parse, and a boolean, fractional or absurd
    number where LMCache's converter would take it (``_checked``)."""
    items = dict(value.items() if isinstance(value, Mapping) else (value or ()))
    out: dict[str, Any] = {}
    ignored: list[str] = []
    for name, raw in items.items():
        key = str(name).lower()
        if key.startswith(ENV_PREFIX.lower()):
            key = key[len(ENV_PREFIX):]
        if key.startswith("lmcache."):
            key = key[len("lmcache."):]
        if key == "extra_config":
            extra = _extra_config(raw)
            if "save_only_first_rank" in extra:
                out["save_only_first_rank"] = _to_bool(extra["save_only_first_rank"])
            if "first_rank_max_local_cpu_size" in extra:
                out["first_rank_max_local_cpu_size"] = _convert("first_rank_max_local_cpu_size",
                                                                extra["first_rank_max_local_cpu_size"])
            continue
        if key not in _CONVERT:
            if raw is not None and str(raw) != "":
                ignored.append(f"{shown(key, quote=False)}={shown(raw, quote=False)}")
            continue
        converted = _convert(key, raw) if raw is not None or key == "local_disk" else None
        if converted is None and key != "local_disk":
            continue
        out[key] = converted
    return LMCacheSettings(**out, given=tuple(sorted(k for k in out if k in _CONVERT)), ignored=tuple(sorted(ignored)))


def vllm_offloading(size_gib: float, ranks: int) -> dict[str, Any]:
    """The settings vLLM's ``--kv-offloading-backend lmcache --kv-offloading-size SIZE`` gives LMCache."""
    return {"local_cpu": True, "max_local_cpu_size": size_gib / ranks}


def as_option(value: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The ``EngineOptions.lmcache`` value (hashable sorted pairs: a plan's cache key) of a settings mapping; a
    mapping or list (an ``extra_config``, a setting kvplan does not read) becomes its JSON text."""
    return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))


def _hashable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    import json  # here: a plain LMCache setting needs no JSON, and json costs every check its import

    try:
        return json.dumps(value, sort_keys=True, default=str)
    except TypeError:  # keys of mixed types (YAML's 1: and a:) do not sort
        return json.dumps(value, default=str)


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES


def _rank_token_bytes(layout: CacheLayout) -> int:
    """Bytes per token of every layer one rank of this stage holds (the K and V, or the latent)."""
    return uniform_token_bytes(layout, "LMCache's tiers", "lmcache",
                               " (LMCache keeps sub-chunk windows for sliding layers)")


def lmcache_tier(layouts: Sequence[CacheLayout], options: EngineOptions, tp: int, demand: Demand) -> OffloadTier:
    s = settings(options.lmcache)
    dtype = layouts[0].kv_dtype.name
    if dtype not in PLAIN_DTYPES:
        raise UsageError(f"kvplan has not read how LMCache stores vLLM's {dtype} cache (its scales or packing); "
                         f"it plans LMCache with {', '.join(sorted(PLAIN_DTYPES))}", field="kv_dtype")
    per_token = [_rank_token_bytes(layout) for layout in layouts]  # one per pipeline stage
    mla = any(isinstance(g.layer, MLA) for layout in layouts for g in layout.groups)
    world = tp * len(layouts)
    first_only = mla and (s.save_only_first_rank is None or s.save_only_first_rank) and world > 1
    if first_only and len(layouts) > 1:
        raise UsageError("LMCache saves an MLA cache on rank 0 only (save_only_first_rank), which holds the first "
                         "pipeline stage's layers alone: kvplan does not plan it with pipeline parallelism",
                         field="pp")
    storing = 1 if first_only else world
    chunk = s.chunk_size
    chunk_raw = [chunk * t for t in per_token]
    chunk_phys = [_aligned(r) for r in chunk_raw]
    cpu_gib = s.max_local_cpu_size
    if first_only and s.first_rank_max_local_cpu_size is not None:
        cpu_gib = s.first_rank_max_local_cpu_size  # rank 0's pool (LocalCPUBackend.initialize_allocator)
    cpu_bytes = int(cpu_gib * GIB) if s.max_local_cpu_size > 0 else 0  # no LocalCPUBackend at 0
    disk_bytes = int(s.max_local_disk_size * GIB) if s.local_disk else 0
    if disk_bytes and not cpu_bytes:
        raise UsageError("LMCache's local disk needs max_local_cpu_size > 0: LocalDiskBackend asserts a "
                         "LocalCPUBackend (its pinned pool stages every chunk)", field="lmcache")

    # one request of max_model_len, stored as a prompt of that length
    length = demand.max_model_len
    saved = length if s.save_unfull_chunk or s.enable_blending else length // chunk * chunk
    full, partial = divmod(saved, chunk)
    request_phys = [full * p + (_aligned(partial * t) if partial else 0) for p, t in zip(chunk_phys, per_token)]

    def held(pool: int) -> tuple[int, int]:
        chunks = min(pool // p for p in chunk_phys)
        requests = min(pool // r for r in request_phys) if saved else 0
        return chunks, requests

    cpu_chunks, cpu_requests = held(cpu_bytes) if s.local_cpu else (0, 0)
    link = find_link(options.offload_link)
    request_bytes = saved * max(per_token)
    notes = [
        f"LMCache {LMCACHE_VERSION}: a chunk of {chunk} tokens is {max(chunk_raw):,} B per rank (the rank's "
        f"{max(per_token):,} B per token x {chunk}), {max(chunk_phys):,} B in its pinned pool (4,096-B aligned)",
        "LMCache stores a request's prompt" + ("" if s.save_unfull_chunk or s.enable_blending else
                                                 " in whole chunks (save_unfull_chunk is off)")
        + ("" if s.save_decode_cache else " and no decoded tokens (save_decode_cache is off)")
        + f": a {length:,}-token request stores {saved:,} tokens",
    ]
    if cpu_bytes:
        who = "rank 0 pins" if first_only else f"each of the {world} ranks pins"
        notes.append(f"LMCache allocates its CPU pool whole at start-up: {who} {cpu_bytes:,} B "
                     "(MixedMemoryAllocator), used or not")
    notes.append(f"LMCache also keeps a one-chunk GPU staging buffer ({max(chunk_raw):,} B per GPU; "
                 "gpu_connectors.py VLLMPagedMemGPUConnectorV2): the GPU plan does not subtract it")
    if first_only:
        notes.append("LMCache with MLA: rank 0 alone stores the latent cache (save_only_first_rank) and "
                     "broadcasts it to the other ranks when loading")
    if not s.local_cpu and cpu_bytes:
        notes.append("LMCache local_cpu is off: the pinned pool only stages chunks on their way to disk")
    if disk_bytes:
        notes.append("LMCache writes each chunk to every local tier (StorageManager.batched_put): the disk "
                     "holds copies of the CPU tier's chunks, and older ones")
    defaults = [f"{f.name} {getattr(LMCacheSettings(), f.name)}" for f in fields(LMCacheSettings)
                if f.name in _CONVERT and f.name not in s.given and f.name != "enable_blending"]
    if defaults:
        notes.append("LMCache defaults assumed: " + ", ".join(defaults))
    if s.ignored:
        shown = ", ".join(s.ignored[:8]) + (f" and {len(s.ignored) - 8} more" if len(s.ignored) > 8 else "")
        notes.append(f"LMCache settings kvplan does not read: {shown} (remote, P2P, GDS and "
                     "layerwise paths, and anything that changes what is stored, are not in these figures)")
    if saved == 0:
        notes.append(f"a {length:,}-token request is shorter than one {chunk}-token chunk: LMCache stores none of it")
    disk = None
    if disk_bytes:
        disk_chunks, disk_requests = held(disk_bytes)
        disk = DiskTier(kind=f"LMCache local disk ({s.max_local_disk_size:g} GiB per rank)",
                        disk_bytes=disk_bytes * storing, blocks=disk_chunks, tokens=disk_chunks * chunk,
                        requests=disk_requests)
    pinned = cpu_bytes * storing
    return OffloadTier(
        kind=f"LMCache local CPU ({cpu_gib:g} GiB per rank, LMCacheConnectorV1)", host_bytes=pinned,
        blocks=cpu_chunks, block_size=chunk, tokens=cpu_chunks * chunk, pinned_bytes=pinned,
        requests=cpu_requests, request_bytes_per_gpu=request_bytes, link=link,
        restore_seconds=request_bytes / link.bytes_per_s, disk=disk, remarks=tuple(notes))


# ------------------------------------------------------------------------------------------ deployments

LMCACHE_CONNECTORS = ("LMCacheConnectorV1", "LMCacheConnectorV1Dynamic")


def serve_settings(given: Mapping[str, Any]) -> tuple[tuple[tuple[str, Any], ...] | None, list[Any]]:
    """``EngineOptions.lmcache`` and the remarks from a deployment's vLLM settings: ``--kv-transfer-config``
    JSON, ``--kv-offloading-backend lmcache`` with ``--kv-offloading-size``, and the ``LMCACHE_*`` variables
    (settings ``lmcache_*``). None where vLLM does not load LMCache."""
    from kvplan.engines.serve_format import ServeRemark, json_object

    remarks: list[ServeRemark] = []
    extra: dict[str, Any] = {}
    active = False
    raw = given.get("kv_transfer_config")
    if raw is not None:
        config = json_object(raw, "--kv-transfer-config", "kv_transfer_config")
        connector = str(config.get("kv_connector") or "")
        found = config.get("kv_connector_extra_config") or {}
        if not isinstance(found, dict):
            raise UsageError("--kv-transfer-config: kv_connector_extra_config is not a JSON object",
                             field="kv_transfer_config")
        if connector in LMCACHE_CONNECTORS:
            active, extra = True, {k: v for k, v in found.items() if str(k).startswith("lmcache.")}
        elif connector == "LMCacheMPConnector":
            remarks.append(ServeRemark("warning", "offload-not-planned", "--kv-transfer-config LMCacheMPConnector: "
                                       "LMCache's multiprocess server holds the tiers outside vLLM; kvplan does not "
                                       "plan it", "kv_transfer_config"))
        elif connector:
            remarks.append(ServeRemark("note", "not-read", f"--kv-transfer-config {shown(connector, quote=False)}: "
                                       "kvplan does not plan "
                                       "this connector; the GPU plan is unchanged", "kv_transfer_config"))
    size = given.get("kv_offloading_size")
    if size is not None and str(given.get("kv_offloading_backend") or "native").lower() == "lmcache":
        # vLLM replaces kv_connector_extra_config with these two (_post_init_kv_transfer_config)
        ranks = max(1, int(given.get("tp") or 1)) * max(1, int(given.get("pp") or 1))  # tp < 1: refused by the plan
        active, extra = True, {f"lmcache.{k}": v for k, v in vllm_offloading(float(size), ranks).items()}
    env = {k[len("lmcache_"):]: v for k, v in given.items() if k.startswith("lmcache_")}
    config_file = env.pop("config_file", None)  # os.getenv as it is (v1/config.py): no quotes taken off
    env = {k: env_value(v) for k, v in env.items()}
    if not active:
        if env or config_file is not None:
            remarks.append(ServeRemark("note", "not-read", "LMCACHE_ variables without LMCacheConnectorV1: vLLM does "
                                       "not load LMCache", next(f"lmcache_{k}" for k in [*env, "config_file"]
                                                                if f"lmcache_{k}" in given)))
        return None, remarks
    if config_file is not None:
        remarks.append(ServeRemark("warning", "not-read", f"LMCACHE_CONFIG_FILE {shown(config_file, quote=False)}: "
                                   "the file is read inside "
                                   "the container, not by kvplan; the LMCACHE_ variables and the connector's extra "
                                   "config are planned, LMCache's defaults for the rest", "lmcache_config_file"))
    env, env_remarks = _screen_env(env, config_file)
    remarks.extend(env_remarks)
    for key, raw in list(extra.items()):
        name = key[len("lmcache."):]
        if _malformed(name, raw):
            # vllm_v1_adapter.py _apply_extra_config -> config_base.py validate_and_set_config_value: the
            # converter's ValueError is logged and the setting keeps what the environment or file gave it
            del extra[key]
            kept = f"LMCACHE_{name.upper()} {shown(env[name])}" if name in env else _default_said(name, config_file)
            remarks.append(ServeRemark("warning", "lmcache-value", f"kv_connector_extra_config {key} {shown(raw)} is "
                                       "not "
                                       f"{_KIND[name]}: LMCache {LMCACHE_VERSION} logs a warning and keeps {kept}; "
                                       "kvplan plans that", "kv_transfer_config"))
    merged = {**env, **{k[len("lmcache."):]: v for k, v in extra.items()}}  # the extra config overrides
    settings(merged)  # refuse what LMCache would not parse, here where the deployment's line is known
    return as_option(merged), remarks


_KIND = {"chunk_size": "an integer", "max_local_cpu_size": "a number", "max_local_disk_size": "a number"}


def _malformed(name: str, raw: Any) -> bool:
    """A value LMCache's own converter rejects (int / float; its booleans and disk paths accept anything)."""
    if name not in _KIND or raw is None:
        return False
    try:
        _CONVERT[name](raw)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf), JSON's Infinity
        return True
    return False


def _default_said(name: str, config_file: Any) -> str:
    default = getattr(LMCacheSettings(), name)
    return (f"the value of LMCACHE_CONFIG_FILE {shown(config_file, quote=False)} (not read by kvplan) or its default "
            f"{default}"
            if config_file is not None else f"its default {default}")


def _screen_env(env: dict[str, Any], config_file: Any) -> tuple[dict[str, Any], list[Any]]:
    """The ``LMCACHE_*`` values LMCache can use, and what it does with the others (LMCache 0.5.6).

    With ``LMCACHE_CONFIG_FILE`` (``v1/config.py`` ``_update_config_from_env``) a value its converter rejects is
    logged ("Failed to parse ...") and the setting keeps the file's value or its default: a warning, planned with
    the default. Without a file (``v1/config_base.py`` ``_from_env`` -> ``_apply_env_converter_safely``) the
    setting becomes None, not the default, and the connector fails where it uses it (``chunk_size`` in the KV
    shape, ``max_local_cpu_size > 0`` in ``storage_backend/__init__.py`` ``CreateStorageBackends``,
    ``max_local_disk_size`` only with a local disk): an error there, a warning where the setting is unused."""
    from kvplan.engines.serve_format import ServeRemark

    kept = dict(env)
    remarks: list[Any] = []
    for name, raw in env.items():
        if not _malformed(name, raw):
            continue
        var = f"LMCACHE_{name.upper()}"
        del kept[name]
        if config_file is not None:
            remarks.append(ServeRemark("warning", "lmcache-value", f"{var} {shown(raw)} is not {_KIND[name]}: LMCache "
                                       f"{LMCACHE_VERSION} logs a warning and keeps "
                                       f"{_default_said(name, config_file)}; kvplan plans the default",
                                       f"lmcache_{name}"))
        elif name == "max_local_disk_size" and not env.get("local_disk"):
            remarks.append(ServeRemark("warning", "lmcache-value", f"{var} {shown(raw)} is not a number: LMCache "
                                       f"{LMCACHE_VERSION} logs a warning and sets it to None, unused without "
                                       "LMCACHE_LOCAL_DISK", f"lmcache_{name}"))
        else:
            raise UsageError(f"{var} {shown(raw)} is not {_KIND[name]}: LMCache {LMCACHE_VERSION} logs a warning and "
                             "sets "
                             f"{name} to None, not its default, without LMCACHE_CONFIG_FILE; the connector then fails "
                             "at start-up", field="environment")
    return kept, remarks


def read_config_file(path: str) -> dict[str, Any]:
    """An LMCache YAML config file (what ``LMCACHE_CONFIG_FILE`` names): ``{name: value}``."""
    from kvplan.errors import KvplanError
    from kvplan.safe_io import read_yaml

    try:
        data = read_yaml(path)
    except KvplanError as exc:
        raise UsageError(str(exc), field="lmcache_config") from None
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}", field="lmcache_config") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a mapping of LMCache settings", field="lmcache_config")
    try:
        settings(data)  # refuse what LMCache would not parse
    except UsageError as exc:
        raise UsageError(f"{path}: {exc.message}", field="lmcache_config") from None
    return {str(k): v for k, v in data.items()}
