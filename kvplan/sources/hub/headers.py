"""The weights of a Hub model from its safetensors headers: which files, and two range requests each.

Per file: its 8-byte header length, then exactly the JSON header; never a byte of the weights.
huggingface_hub's own ``get_safetensors_metadata`` is not used because it asks for the first
100 KB of every file, which for most shards is mostly weight data, and downloads the index too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvplan.errors import ConfigError
from kvplan.sources.hub.settings import MAX_SHARDS, HubSettings

_U64 = 1 << 64  # safetensors stores shapes and offsets as unsigned 64-bit integers


def pick_safetensors(files: list[str]) -> tuple[list[str], str | None]:
    """The top-level safetensors files holding the model's weights, or ([], why not): the same choice
    as for a local directory (``kvplan.sources.safetensors_weights.pick_safetensors``)."""
    from kvplan.sources.safetensors_weights import pick_safetensors as pick

    shards, why = pick(files)
    if not shards and why == "no safetensors weight files":
        why = "the repository has no safetensors weight files"
    return shards, why


def summarize_headers(repo: str, sha: str, files: list[str], config: dict, settings: HubSettings,
                      record_format: int, progress: Callable[[str], None]) -> dict[str, Any]:
    """The record of a commit's weight files: each file's header summarized (bytes and elements by dtype)."""
    from concurrent.futures import ThreadPoolExecutor

    from huggingface_hub.utils import build_hf_headers

    from kvplan.sources.safetensors_weights import quant_scheme, summarize_header

    shards, why = pick_safetensors(files)
    if len(shards) > MAX_SHARDS:
        shards, why = [], f"{len(shards):,} safetensors files, more than the {MAX_SHARDS:,} kvplan reads"
    record: dict[str, Any] = {"format": record_format, "repo": repo, "commit": sha, "files": None, "reason": why}
    if not shards:
        return record
    scheme = quant_scheme(config)
    headers = build_hf_headers()
    done = [0]

    def one(filename: str) -> dict[str, Any]:
        tensors = read_header(repo, sha, filename, settings, headers)
        done[0] += 1
        progress(f"safetensors headers {done[0]}/{len(shards)}")
        return summarize_header(tensors, scheme, f"{repo}@{sha[:12]}/{filename}")

    progress(f"safetensors headers 0/{len(shards)}")
    pool = ThreadPoolExecutor(max_workers=min(8, len(shards)))
    try:
        summaries = list(pool.map(one, shards))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # on an error, start no more requests
    record["files"] = dict(zip(shards, summaries))
    return record


def read_header(repo: str, sha: str, filename: str, settings: HubSettings,
                headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The tensors of one file's JSON header (two range requests)."""
    from huggingface_hub import hf_hub_url

    from kvplan.sources.hub.http import get_range
    from kvplan.sources.safetensors_weights import header_length, parse_header

    where = f"{repo}@{sha[:12]}/{filename}"
    url = hf_hub_url(repo, filename, revision=sha)
    size = header_length(get_range(url, 0, 8, settings, headers), where)
    raw = get_range(url, 8, size, settings, headers)
    if len(raw) < size:
        raise ConfigError(f"{where}: truncated safetensors header ({len(raw)} of {size} bytes)")
    tensors = parse_header(raw, where)  # the bounded parser: deep nesting and long integers are one line
    for name, info in tensors.items():
        if any(v >= _U64 for v in (*info["shape"], *info["data_offsets"])):
            raise ConfigError(f"{where}: tensor {name[:80]!r} has a shape or offset beyond 2^64")
    return tensors
