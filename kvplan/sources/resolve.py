"""Turn a MODEL argument into a ModelSpec: an existing path, then a bundled spec, then the Hub."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.errors import NotFoundError, UsageError
from kvplan.sources.bundled import close_bundled
from kvplan.spec import ModelSpec

if TYPE_CHECKING:
    from pathlib import Path

    from kvplan.errors import ConfigError

    from kvplan.sources.families.tensors import ParamCount

_YAML_SUFFIXES = (".yaml", ".yml")


def load_model(name: str, *, revision: str | None = None, hub: bool = False) -> ModelSpec:
    """Resolve ``name``: a config.json / model directory / YAML spec path, then a bundled model, then
    a model on the Hugging Face Hub (``org/name``). ``hub`` skips the bundled specs; a ``revision``
    (or ``org/name@rev``) implies the Hub. The Hub code (and huggingface_hub) is imported only then.
    """
    expanded = os.path.expanduser(name)
    if os.path.exists(expanded):  # os.path, not pathlib: a bundled lookup must not pay for pathlib's import
        if hub or revision is not None:
            raise UsageError(f"{name} is a local path: the Hub and its revisions apply to Hub model ids only",
                             field="hub" if hub else "revision")
        from kvplan.safe_io import path_is_file, path_suffix, path_text

        named = path_text(expanded)
        if path_suffix(named).lower() in _YAML_SUFFIXES and path_is_file(named):  # load_path's first case, without
            from kvplan.sources.yaml_spec import load_user_spec  # pathlib (~5 ms of a check's start)

            return load_user_spec(named)
        from pathlib import Path

        return load_path(Path(expanded))
    repo, at_rev = name, None
    if "@" in name and not _looks_like_path(name):
        from kvplan.sources.hub import split_revision

        repo, at_rev = split_revision(name)
        if revision is not None and revision != at_rev:
            raise UsageError(f"'{name}' names revision '{at_rev}', and revision '{revision}' is given too: give one",
                             field="revision")
        revision = at_rev
    if not hub and revision is None:
        from kvplan.sources.bundled import load_bundled

        spec = load_bundled(name)
        if spec is not None:
            return spec
    if hub or revision is not None or ("/" in repo and not _looks_like_path(repo)):
        from kvplan.sources.hub import load_hub_model, looks_like_hub_id

        if looks_like_hub_id(repo):
            return load_hub_model(repo, revision, fallback=not hub and revision is None)
        if hub or revision is not None:
            raise UsageError(f"'{repo}' is not a Hugging Face Hub model id (expected org/name)")
    raise NotFoundError(_not_found_message(name))


def load_path(path: Path) -> ModelSpec:
    if path.is_file() and path.suffix.lower() in _YAML_SUFFIXES:
        from kvplan.sources.yaml_spec import load_user_spec

        return load_user_spec(path)
    from kvplan.errors import ConfigError
    from kvplan.sources.hf_config import read_config_file, spec_and_count

    config = read_config_file(path)
    model_id = path.name if path.is_dir() else (path.parent.name or path.stem)
    try:
        spec, count, count_error = spec_and_count(config, model_id=model_id, source=str(path))
    except ConfigError as exc:  # name the file: the reader only knows the fields
        raise ConfigError(f"{path}: {exc}") from None
    directory = path if path.is_dir() else path.parent  # Path("config.json").parent is Path(".")
    config_file = str(path / "config.json") if path.is_dir() else str(path)
    return with_local_weights(spec, config, count, count_error, str(directory), config_file)


def with_local_weights(spec: ModelSpec, config: dict, count: ParamCount | None, count_error: ConfigError | None,
                       directory: str, config_file: str) -> ModelSpec:
    """``spec`` with the weights of its model directory: exact bytes and parameters from the
    safetensors headers there (the files ``model.safetensors.index.json`` lists, else the
    ``model*.safetensors`` set), else an analytic count from the config, labelled as such."""
    from kvplan.record import replace

    from kvplan.errors import ConfigError
    from kvplan.sources.hf_params import checkpoint_dtype, weights_bytes
    from kvplan.sources.safetensors_weights import local_weights, quant_scheme, weights_dtype

    notes = list(spec.assumptions)
    try:
        weights, why = local_weights(directory, config)
    except ConfigError as exc:
        weights, why = None, f"the safetensors headers cannot be read ({exc})"
    scheme = quant_scheme(config)
    if weights is not None and weights.bytes:
        plural = "file" if weights.files == 1 else "files"
        return replace(spec, params=weights.params or None, weights_bytes=weights.bytes,
                       weights_dtype=weights_dtype(weights, scheme),
                       weights_source=f"safetensors headers in {directory} ({weights.files} {plural}, "
                                      f"{weights.tensors:,} tensors)",
                       assumptions=tuple(dict.fromkeys([*notes, *weights.notes])))
    why = why or "the safetensors files hold no tensors"
    from kvplan.sources.safetensors_weights import INDEX_NAME, index_totals

    try:  # config.json and the index copied without the weights: the index states the checkpoint's bytes
        totals = index_totals(directory)
    except ConfigError as exc:
        totals = None
        notes.append(f"weights: {exc}; not used")
    if totals is not None:
        params = totals.total_parameters
        if params is None and count is not None:
            params = count.total
            notes.append(f"weights: params are an analytic count from {config_file} ({INDEX_NAME} states no "
                         "total_parameters)")
        elif params is None:
            notes.append(f"weights: params unknown ({INDEX_NAME} states no total_parameters and the config "
                         f"cannot be counted: {count_error})")
        notes.append(f"weights: weights_bytes is the checkpoint's size as {INDEX_NAME} states it "
                     f"(metadata.total_size; {why} in {directory})")
        return replace(spec, params=params, weights_bytes=totals.total_size,
                       weights_dtype=scheme.name or checkpoint_dtype(config)[0],
                       weights_source=f"{INDEX_NAME} metadata.total_size in {directory}",
                       assumptions=tuple(dict.fromkeys(notes)))
    try:
        if count is None:
            raise count_error or ConfigError("no parameter count")
        nbytes, how = weights_bytes(config, count)
    except ConfigError as exc:  # as for the Hub: the cache is still described, the weights are not
        notes.append(f"weights: {why} in {directory}, and the config cannot be counted ({exc}): "
                     "weights unknown")
        return replace(spec, assumptions=tuple(dict.fromkeys(notes)))
    notes.append(f"weights: {why} in {directory}: params and weights_bytes are an analytic count from "
                 f"{config_file}, not read from the checkpoint")
    notes += [f"weights: {a}" for a in count.assumptions]
    return replace(spec, params=count.total, weights_bytes=nbytes,
                   weights_dtype=scheme.name or checkpoint_dtype(config)[0],
                   weights_source=f"computed from {config_file}, not the checkpoint: {how}",
                   assumptions=tuple(dict.fromkeys(notes)))


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.endswith((".json", ".yaml", ".yml")) or "\\" in name


def _not_found_message(name: str) -> str:
    if "/" in name and _looks_like_path(name):
        return f"no such file: {name}"
    close = close_bundled(name)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"'{name}' is not a file or a bundled model{hint} "
            "(pass a config.json, a model directory or a YAML spec; `kvplan models` lists the bundled ones)")
