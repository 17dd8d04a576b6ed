"""Turn a MODEL argument into a ModelSpec: an existing path, then a bundled spec, then the Hub."""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import NotFoundError
from kvplan.spec import ModelSpec

_YAML_SUFFIXES = (".yaml", ".yml")


def load_model(name: str) -> ModelSpec:
    """Resolve ``name``: a config.json / model directory / YAML spec path, or a bundled model."""
    path = Path(name).expanduser()
    if path.exists():
        return load_path(path)
    from kvplan.sources.bundled import load_bundled

    spec = load_bundled(name)
    if spec is not None:
        return spec
    raise NotFoundError(_not_found_message(name))


def load_path(path: Path) -> ModelSpec:
    if path.is_file() and path.suffix.lower() in _YAML_SUFFIXES:
        from kvplan.sources.yaml_spec import load_user_spec

        return load_user_spec(path)
    from kvplan.errors import ConfigError
    from kvplan.sources.hf_config import read_config_file, spec_from_config

    config = read_config_file(path)
    model_id = path.name if path.is_dir() else (path.parent.name or path.stem)
    try:
        return spec_from_config(config, model_id=model_id, source=str(path))
    except ConfigError as exc:  # name the file: the reader only knows the fields
        raise ConfigError(f"{path}: {exc}") from None


def _not_found_message(name: str) -> str:
    import difflib

    from kvplan.sources.bundled import index

    looks_like_path = "/" in name and (name.startswith((".", "/", "~")) or name.endswith((".json", ".yaml", ".yml")))
    if looks_like_path:
        return f"no such file: {name}"
    close = difflib.get_close_matches(name.lower(), list(index()), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (f"'{name}' is not a file or a bundled model{hint} "
            "(pass a config.json, a model directory or a YAML spec; `kvplan models` lists the bundled ones)")
