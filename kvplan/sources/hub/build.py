"""The ModelSpec of a Hub model: its config, with weights from the safetensors headers' summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError
from kvplan.record import replace
from kvplan.spec import ModelSpec


def build_spec(repo: str, sha: str, config: dict, config_file: str, record: dict[str, Any] | None, *,
               from_cache: bool, record_path: Path, notes: list[str]) -> ModelSpec:
    """The ModelSpec of ``config``, with weights from the header record (or counted from the config)."""
    from kvplan.sources.hf_config import spec_from_config

    where = f"{repo}@{sha[:12]}/{config_file}"
    try:
        spec = spec_from_config(config, model_id=repo, source=repo)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    assumptions = [*notes, *spec.assumptions]
    params = w_bytes = None
    w_dtype = w_source = None
    if record is not None and record.get("files"):
        from kvplan.sources.safetensors_weights import (
            combine,
            quant_scheme,
            weights_dtype,
        )

        scheme = quant_scheme(config)
        try:
            weights = combine(record["files"], scheme)
        except (TypeError, KeyError, ValueError) as exc:  # a damaged or hand-edited cache file
            raise ConfigError(f"{where}: kvplan's summary of the safetensors headers ({record_path}) cannot be "
                              f"read ({type(exc).__name__}): delete it and run again") from None
        params, w_bytes = weights.params or None, weights.bytes or None
        w_dtype = weights_dtype(weights, scheme)
        w_source = (f"safetensors headers of {repo}@{sha} ({weights.files} "
                    f"{'file' if weights.files == 1 else 'files'}, {weights.tensors:,} tensors)")
        assumptions += weights.notes
        if from_cache:
            assumptions.append(f"weights: from kvplan's summary of the safetensors headers of {repo}@{sha[:12]}, "
                               f"cached in {record_path}")
    else:
        if record is not None:
            why = f"{record.get('reason') or 'no safetensors weight files'} ({repo}@{sha[:12]})"
        else:
            why = (f"kvplan has no cached summary of the safetensors headers of {repo}@{sha[:12]} "
                   "(HF_HUB_OFFLINE is set)")
        params, w_bytes, w_dtype, how, more = _analytic(config)
        if params is not None:
            w_source = f"computed from {config_file} of {repo}@{sha}, not the checkpoint: {how}"
            assumptions.append(f"weights: {why}: params and weights_bytes are an analytic count from {config_file}")
            assumptions += [f"weights: {a}" for a in more]
        else:
            assumptions.append(f"weights: {why}, and {how}: weights unknown")
    return replace(spec, revision=sha, params=params, weights_bytes=w_bytes, weights_dtype=w_dtype,
                   weights_source=w_source, assumptions=tuple(dict.fromkeys(assumptions)))


def _analytic(config: dict) -> tuple[int | None, int | None, str | None, str, tuple[str, ...]]:
    from kvplan.sources.hf_params import count_params, weights_bytes
    from kvplan.sources.safetensors_weights import quant_scheme

    try:
        count = count_params(config)
        nbytes, how = weights_bytes(config, count)
    except ConfigError as exc:
        return None, None, None, f"the config cannot be counted ({exc})", ()
    scheme = quant_scheme(config)
    dtype = scheme.name
    if dtype is None:
        from kvplan.sources.hf_params import _checkpoint_dtype

        dtype = _checkpoint_dtype(config)[0]
    return count.total, nbytes, dtype, how, count.assumptions
