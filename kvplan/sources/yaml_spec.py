"""YAML model descriptions: the format of ``model_specs/`` and of user spec files.

The YAML mirrors ``kvplan.spec.ModelSpec`` field for field; ``kvplan schema`` prints its JSON
schema. User files are validated by pydantic (one line per problem, naming the field; a valid one is read by
``kvplan.sources.spec_fast`` without importing pydantic); bundled
files are validated by the test suite, so loading them skips pydantic and starts faster.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.errors import ConfigError, KvplanError
from kvplan.spec import KINDS, LayerSpec, ModelSpec, RopeScaling, layer_from_fields

if TYPE_CHECKING:  # bundled specs come through here on every start: no pathlib import at run time
    from pathlib import Path


def _yaml_load(text: str, where: str) -> Any:
    from kvplan.safe_io import load_yaml

    return load_yaml(text, where)  # bounded depth, aliases and numbers


def read_yaml_file(path: Path) -> dict[str, Any]:
    from kvplan.safe_io import read_text

    data = _yaml_load(read_text(path), str(path))  # regular files only, bounded size, UTF-8
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a model spec is a YAML mapping (id, model_type, layers, ...)")
    return data


def validate_spec(data: dict[str, Any], where: str) -> ModelSpec:
    """Validate untrusted spec data with pydantic; the first problem becomes a one-line error.

    Strict, as JSON: YAML's ``true`` is not the number 1 and ``"8"`` not the number 8 (lax pydantic
    would take both), while YAML lists still fill the spec's tuples.
    """
    from kvplan.jsontext import dumps_checked  # json's own encoder, without importing json (and re) on every check

    def not_json(value: Any) -> Any:
        raise ConfigError(f"{where}: {repr(value)[:80]} ({type(value).__name__}) is not a value a model spec holds")

    try:
        text = dumps_checked(data, not_json)
    except ConfigError:
        raise
    except ValueError:  # allow_nan=False
        raise ConfigError(f"{where}: NaN or infinity in a model spec") from None
    from kvplan.sources import spec_fast

    spec = spec_fast.read(data)  # a valid spec, without importing pydantic (~185 ms)
    if spec is not None:
        return spec
    from pydantic import ValidationError

    try:
        return spec_adapter().validate_json(text, strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        # a layer group is validated as the class its kind names: drop that tag (layers.0.full.kv_heads)
        parts = [p for i, p in enumerate(err["loc"]) if not (i >= 2 and err["loc"][i - 2] == "layers" and p in KINDS)]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            parts.append("kind")
            tag = (err.get("ctx") or {}).get("tag")
            msg = f"unknown layer kind '{tag}' (known: {', '.join(KINDS)})" if tag is not None else "Field required"
        loc = ".".join(str(p) for p in parts) or "spec"
        if isinstance(err.get("input"), bool) and err["type"] in ("int_type", "float_type"):
            msg = f"{str(err['input']).lower()} is a boolean, not a number"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{where}: {loc}: {msg}{more}") from None


def spec_adapter() -> Any:
    from pydantic import TypeAdapter

    from kvplan.layouts.base import typing_names

    typing_names()
    return TypeAdapter(ModelSpec)


def load_user_spec(path: Path) -> ModelSpec:
    spec = validate_spec(read_yaml_file(path), str(path))
    return spec if spec.source else _with_source(spec, str(path))


def spec_from_trusted_dict(data: dict[str, Any], where: str) -> ModelSpec:
    """Build a spec from data already validated by the tests (bundled files): no pydantic."""
    try:
        fields = dict(data)
        fields["layers"] = tuple(_layer(g) for g in fields["layers"])
        if fields.get("rope_scaling") is not None:
            fields["rope_scaling"] = RopeScaling(**fields["rope_scaling"])
        for name in ("aliases", "assumptions"):
            if name in fields:
                fields[name] = tuple(fields[name])
        return ModelSpec(**fields)
    except KvplanError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (TypeError, KeyError) as exc:
        raise ConfigError(f"{where}: not a valid model spec ({exc})") from None


def _layer(group: dict[str, Any]) -> LayerSpec:
    group = dict(group)
    if group.get("ssm_state") is not None:
        group["ssm_state"] = tuple(group["ssm_state"])
    return layer_from_fields(group)


# left out at 0, their default in effect, so that specs without MTP layers read as they always did
_ZERO_LEFT_OUT = frozenset({"mtp_layers", "mtp_weights_bytes"})


def spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    """A spec as plain data in YAML field order, leaving out fields that are unset (and MTP fields at 0)."""
    from kvplan.record import fields as dc_fields

    def clean(obj: Any) -> Any:
        if hasattr(obj, "__dataclass_fields__"):
            out = {}
            for f in dc_fields(obj):
                value = getattr(obj, f.name)
                if value is None or value == () or (f.name in _ZERO_LEFT_OUT and value == 0):
                    continue
                out[f.name] = clean(value)
            return out
        if isinstance(obj, tuple):
            return [clean(v) for v in obj]
        return obj

    return clean(spec)


def dump_spec_yaml(spec: ModelSpec) -> str:
    """YAML text of a spec, one layer group per line."""
    import yaml

    data = spec_to_dict(spec)
    layers = data.pop("layers")

    class _Dumper(yaml.SafeDumper):
        pass

    head = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    lines = ["layers:"]
    for group in layers:
        flow = yaml.dump(group, Dumper=_Dumper, sort_keys=False, default_flow_style=True, width=1000).strip()
        lines.append(f"  - {flow}")
    return head + "\n".join(lines) + "\n"


def _with_source(spec: ModelSpec, source: str) -> ModelSpec:
    from kvplan.record import replace

    return replace(spec, source=source)
