"""Read a Hugging Face ``config.json`` into a :class:`~kvplan.spec.ModelSpec`.

Generic rules first (the field names transformers' config classes and their ``attribute_map``s
accept), then a small adapter per family whose config really differs (``kvplan.sources.hf_families``,
registered by ``model_type``). Every rule of thumb the reader had to apply is recorded in
``ModelSpec.assumptions``; every config it cannot make sense of raises a one-line ``ConfigError``
naming the field and the value.

Generic rules:

- nested ``text_config`` (gemma3, llama4, mistral3, ...): the text model is read from it; the dtype
  may sit at either level.
- layers: ``num_hidden_layers | n_layer | num_layers | n_layers``; query heads:
  ``num_attention_heads | n_head | n_heads``; KV heads: ``num_key_value_heads | num_kv_heads |
  n_head_kv | multi_query_group_num``, else the query heads (transformers' config classes all
  default that way).
- head size: an explicit non-null ``head_dim`` wins over ``hidden_size / num_attention_heads``.
- ``layer_types`` (transformers >= 4.54 spelling: full_attention, sliding_attention,
  chunked_attention, linear_attention, mamba) says what each layer caches; without it a non-null
  ``sliding_window`` (unless ``use_sliding_window`` is false) applies to every layer, which is what
  transformers' ``DynamicCache(config=...)`` builds (``cache_utils.py``) and what vLLM's ``Attention``
  does with a model-level ``cache_config.sliding_window``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError, NotFoundError
from kvplan.spec import LayerSpec, ModelSpec, RopeScaling, group_layers

# Same ceilings as kvplan.spec: far above any real model, low enough to catch typos.
MAX_LAYERS = 100_000
MAX_DIM = 1 << 20
MAX_POSITIONS = 1 << 31
MAX_VOCAB = 1 << 24

LAYER_ALIASES = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEAD_ALIASES = ("num_attention_heads", "n_head", "n_heads")
KV_HEAD_ALIASES = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
HIDDEN_ALIASES = ("hidden_size", "n_embd", "n_embed", "d_model")
HEAD_DIM_ALIASES = ("head_dim", "kv_channels")  # kv_channels: ChatGLM / Megatron spelling
POSITION_ALIASES = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
VOCAB_ALIASES = ("vocab_size", "padded_vocab_size")
DTYPE_ALIASES = ("torch_dtype", "dtype")

_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
}

# layer_types spellings -> what the layer caches.
_FULL_TYPES = {"full_attention", "attention", "global_attention", "full"}
_SLIDING_TYPES = {"sliding_attention", "local_attention", "sliding"}
_CHUNKED_TYPES = {"chunked_attention"}
_RECURRENT_TYPES = {"linear_attention", "mamba", "mamba2"}


# --------------------------------------------------------------------------------------------
# Files


def read_config_file(path: Path) -> dict:
    """Load a ``config.json`` (or a directory holding one) as a dict."""
    path = Path(path)
    if path.is_dir():
        candidate = path / "config.json"
        if not candidate.is_file():
            raise ConfigError(f"{path}: directory has no config.json")
        path = candidate
    elif not path.exists():
        raise NotFoundError(f"{path}: no such file")
    from kvplan.safe_io import read_text

    return parse_json_object(read_text(path), str(path))  # regular files only, bounded size, UTF-8


def parse_json_object(text: str, where: str) -> dict:
    """A JSON object from ``text``; malformed, truncated, too deep JSON is a one-line error naming line:column."""
    from kvplan.safe_io import parse_json_object as bounded

    return bounded(text, where)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


# --------------------------------------------------------------------------------------------
# The reader


class ConfigReader:
    """One config being read: field look-ups with validation, and the assumptions made."""

    def __init__(self, config: dict, defaults: dict[str, tuple[Any, str]] | None = None) -> None:
        self.top = config
        text = config.get("text_config")
        if text is not None and not isinstance(text, dict):
            raise ConfigError(f"text_config is {_json_kind(text)}, expected an object")
        self.cfg: dict = text if text else config
        self.nested = self.cfg is not config
        self.model_type: str = _model_type(config)
        inner = self.cfg.get("model_type") if self.nested else None
        self.text_model_type: str | None = inner if isinstance(inner, str) and inner else None
        # Family defaults (transformers config-class defaults) used when a field is absent.
        self.defaults: dict[str, tuple[Any, str]] = dict(defaults or {})
        self.assumptions: list[str] = []

    # -- bookkeeping ---------------------------------------------------------------------------

    def note(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)

    def has(self, name: str) -> bool:
        return self.cfg.get(name) is not None

    def raw(self, *names: str) -> tuple[str, Any] | None:
        """The first of ``names`` the (text) config sets to a non-null value."""
        for name in names:
            value = self.cfg.get(name)
            if value is not None:
                return name, value
        return None

    # -- typed look-ups ------------------------------------------------------------------------

    def int_of(self, name: str, value: Any, *, maximum: int = MAX_DIM, minimum: int = 1) -> int:
        """Validate one integer field value (JSON floats like 4096.0 are accepted)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}={value!r} is not an integer")
        if isinstance(value, float):
            if not math.isfinite(value) or not value.is_integer():
                raise ConfigError(f"{name}={value!r} is not an integer")
            value = int(value)
        if value < minimum:
            what = "positive" if minimum == 1 else f">= {minimum}"
            raise ConfigError(f"{name}={value} must be {what}")
        if value > maximum:
            raise ConfigError(f"{name}={value} is larger than any real model (limit {maximum})")
        return value

    def int_field(self, *names: str, required: bool = True, maximum: int = MAX_DIM) -> int | None:
        """The first of ``names`` present, validated; else a family default; else error/None."""
        found = self.raw(*names)
        if found is not None:
            return self.int_of(found[0], found[1], maximum=maximum)
        for name in names:
            if name in self.defaults:
                value, origin = self.defaults[name]
                self.note(f"{name} absent: {origin} default {value}")
                return value
        if required:
            label = names[0]
            if len(names) > 1:
                label += f" (nor {', '.join(names[1:])})"
            raise ConfigError(f"config has no {label}")
        return None

    def bool_field(self, name: str, default: bool) -> bool:
        value = self.cfg.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"{name}={value!r} is not true/false")
        return value

    def float_of(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{name}={value!r} must be a positive number")
        return float(value)

    # -- the usual fields ----------------------------------------------------------------------

    def num_layers(self) -> int:
        return self.int_field(*LAYER_ALIASES, maximum=MAX_LAYERS)  # type: ignore[return-value]

    def num_heads(self) -> int:
        return self.int_field(*HEAD_ALIASES)  # type: ignore[return-value]

    def hidden_size(self, required: bool = True) -> int | None:
        return self.int_field(*HIDDEN_ALIASES, required=required)

    def kv_heads(self, *, mha_family: bool = False) -> int:
        heads = self.num_heads()
        found = self.raw(*KV_HEAD_ALIASES)
        if found is not None:
            kv = self.int_of(found[0], found[1])
            name = found[0]
        elif "num_key_value_heads" in self.defaults:
            kv = self.int_field("num_key_value_heads")  # type: ignore[assignment]
            name = "num_key_value_heads"
        else:
            kv, name = heads, "num_key_value_heads"
            if not mha_family:
                self.note(f"num_key_value_heads absent: assumed equal to num_attention_heads={heads} (MHA)")
        if heads % kv:
            raise ConfigError(f"num_attention_heads={heads} is not a multiple of {name}={kv}")
        return kv

    def head_dim(self) -> int:
        found = self.raw(*HEAD_DIM_ALIASES)
        if found is not None:
            return self.int_of(found[0], found[1])
        if "head_dim" in self.defaults:
            return self.int_field("head_dim")  # type: ignore[return-value]
        heads = self.num_heads()
        hidden = self.hidden_size()
        assert hidden is not None
        if hidden % heads:
            raise ConfigError(
                f"hidden_size={hidden} is not divisible by num_attention_heads={heads} and there is no head_dim"
            )
        return hidden // heads

    def sliding_window(self, *names: str) -> int | None:
        """The window every sliding layer uses, or None when the config disables it."""
        names = names or ("sliding_window",)
        if self.cfg.get("use_sliding_window") is False:
            return None
        found = self.raw(*names)
        if found is None:
            for name in names:
                if name in self.defaults:
                    return self.int_field(name, maximum=MAX_POSITIONS)
            return None
        return self.int_of(found[0], found[1], maximum=MAX_POSITIONS)

    # -- layer builders ------------------------------------------------------------------------

    def attention(self, kind: str = "full", *, window: int | None = None, chunk: int | None = None,
                  mha_family: bool = False) -> LayerSpec:
        kv = self.kv_heads(mha_family=mha_family)
        hd = self.head_dim()
        if kind == "sliding":
            return LayerSpec(kind="sliding", kv_heads=kv, head_dim=hd, window=window)
        if kind == "chunked":
            return LayerSpec(kind="chunked", kv_heads=kv, head_dim=hd, chunk=chunk)
        return LayerSpec(kind="full", kv_heads=kv, head_dim=hd)

    def uniform_attention(self, *, mha_family: bool = False) -> list[LayerSpec]:
        """No layer_types: one window (or none) for every layer, as transformers' DynamicCache does."""
        n = self.num_layers()
        window = self.sliding_window()
        if window is None:
            return [self.attention(mha_family=mha_family)] * n
        return [self.attention("sliding", window=window, mha_family=mha_family)] * n

    def layer_types(self) -> list[str] | None:
        types = self.cfg.get("layer_types")
        if types is None:
            return None
        n = self.num_layers()
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ConfigError(f"layer_types={_short(types)} is not a list of strings")
        if len(types) != n:
            raise ConfigError(f"layer_types has {len(types)} entries but num_hidden_layers={n}")
        return types

    def layers_from_types(self, types: list[str], *, window_fields: tuple[str, ...] = ("sliding_window",),
                          recurrent: Callable[[str], LayerSpec] | None = None,
                          mha_family: bool = False) -> list[LayerSpec]:
        """One LayerSpec per ``layer_types`` entry; sliding layers take the first of ``window_fields``."""
        cache: dict[str, LayerSpec] = {}
        out = []
        for index, layer_type in enumerate(types):
            if layer_type not in cache:
                cache[layer_type] = self._layer_of_type(index, layer_type, window_fields, recurrent, mha_family)
            out.append(cache[layer_type])
        return out

    def _layer_of_type(self, index: int, layer_type: str, window_fields: tuple[str, ...],
                       recurrent: Callable[[str], LayerSpec] | None, mha_family: bool) -> LayerSpec:
        if layer_type in _FULL_TYPES:
            return self.attention(mha_family=mha_family)
        if layer_type in _SLIDING_TYPES:
            window = self.sliding_window(*window_fields)
            if window is None:
                # transformers: a sliding layer with no window attends to (and caches) everything.
                self.note(f"layer_types has '{layer_type}' but the config sets no sliding_window: "
                          "cached as full attention")
                return self.attention(mha_family=mha_family)
            return self.attention("sliding", window=window, mha_family=mha_family)
        if layer_type in _CHUNKED_TYPES:
            chunk = self.int_field("attention_chunk_size", required=False, maximum=MAX_POSITIONS)
            if chunk is None:
                raise ConfigError(f"layer_types[{index}]='{layer_type}' but the config has no attention_chunk_size")
            return self.attention("chunked", chunk=chunk, mha_family=mha_family)
        if layer_type in _RECURRENT_TYPES:
            if recurrent is None:
                raise ConfigError(
                    f"layer_types[{index}]='{layer_type}': kvplan does not know the state of "
                    f"model_type '{self.model_type}' {layer_type} layers"
                )
            return recurrent(layer_type)
        raise ConfigError(f"layer_types[{index}]='{layer_type}' is not a layer type kvplan knows")


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _model_type(config: dict) -> str:
    model_type = config.get("model_type")
    if model_type is None:
        text = config.get("text_config")
        if isinstance(text, dict):
            model_type = text.get("model_type")
    if model_type is None:
        raise ConfigError("config has no model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise ConfigError(f"model_type={model_type!r} is not a name")
    return model_type


# --------------------------------------------------------------------------------------------
# Model-wide fields


def _dtype(reader: ConfigReader) -> str:
    for where in (reader.cfg, reader.top):
        for name in DTYPE_ALIASES:
            value = where.get(name)
            if value is None or value == "auto":
                continue
            if not isinstance(value, str):
                raise ConfigError(f"{name}={value!r} is not a dtype name")
            key = value.removeprefix("torch.").lower()
            if key in _DTYPES:
                return _DTYPES[key]
            if key.startswith(("float8", "fp8", "int", "uint", "float4", "fp4")):
                reader.note(f"{name}={value} is a storage dtype, not an activation dtype: assumed bfloat16")
                return "bfloat16"
            raise ConfigError(f"{name}={value!r} is not a model dtype kvplan knows (bfloat16, float16, float32)")
    reader.note("torch_dtype absent: assumed bfloat16")
    return "bfloat16"


def _max_positions(reader: ConfigReader) -> int | None:
    return reader.int_field(*POSITION_ALIASES, required=False, maximum=MAX_POSITIONS)


def _rope_scaling(reader: ConfigReader, max_positions: int | None) -> RopeScaling | None:
    found = reader.raw("rope_scaling", "rope_parameters")
    if found is None:
        return None
    name, params = found
    if not isinstance(params, dict):
        raise ConfigError(f"{name}={_short(params)} is not an object")
    # transformers 5 may give one entry per layer type (gemma3): the global layers' one scales.
    if params and all(isinstance(v, dict) for v in params.values()):
        params = params.get("full_attention") or next(iter(params.values()))
    kind = params.get("rope_type", params.get("type"))
    if kind is None or kind == "default":
        return None
    if not isinstance(kind, str):
        raise ConfigError(f"{name}.rope_type={kind!r} is not a name")
    if kind == "proportional" and params.get("factor") in (None, 1, 1.0):
        # Gemma 4 global layers: partial-rotary ("p-RoPE") frequencies, factor defaulting to 1.0
        # (transformers modeling_rope_utils._compute_proportional_rope_parameters): no extension.
        return None
    if kind == "su":  # Phi-3's early name for longrope (transformers Phi3Config)
        kind = "longrope"
    factor = params.get("factor")
    if factor is not None:
        factor = reader.float_of(f"{name}.factor", factor)
    original_field = params.get("original_max_position_embeddings")
    origin = f"{name}.original_max_position_embeddings"
    if original_field is None and reader.has("original_max_position_embeddings"):
        original_field = reader.cfg["original_max_position_embeddings"]  # Phi-3 keeps it top-level
        origin = "original_max_position_embeddings"
    original = None
    if original_field is not None:
        original = reader.int_of(origin, original_field, maximum=MAX_POSITIONS)
    # The config's own max_position_embeddings, when above the original length, is the extended
    # length the model declares (Llama 3.1: llama3 factor 8 over 8,192, yet 131,072 declared); only a
    # config that still declares the original length (Qwen with yarn added) extends by the factor.
    extends_to = None
    if original is not None and max_positions is not None and max_positions > original:
        extends_to = max_positions
        reader.note(f"rope_scaling {kind}: extends the context from {original:,} to the declared "
                    f"max_position_embeddings {max_positions:,}")
    elif factor is not None and original is not None:
        extends_to = int(round(original * factor))
        reader.note(f"rope_scaling {kind}: extends_to={extends_to:,} = original_max_position_embeddings "
                    f"{original:,} x factor {factor:g}")
    elif factor is not None:
        reader.note(f"rope_scaling {kind}: factor {factor:g} but no original_max_position_embeddings: "
                    "extends_to unknown")
    if extends_to is not None and extends_to > MAX_POSITIONS:
        raise ConfigError(f"{name}: extends_to={extends_to} is larger than any real model")
    return RopeScaling(type=kind, factor=factor, original_max_position_embeddings=original, extends_to=extends_to)


# --------------------------------------------------------------------------------------------
# Entry point


def spec_from_config(config: dict, *, model_id: str, source: str | None = None) -> ModelSpec:
    """Build the ModelSpec a Hugging Face config describes."""
    from kvplan.sources import hf_families

    if not isinstance(config, dict):
        raise ConfigError(f"config is {_json_kind(config)}, expected an object")
    model_type = _model_type(config)
    inner = config.get("text_config")
    inner_type = inner.get("model_type") if isinstance(inner, dict) else None
    family = hf_families.lookup(inner_type if isinstance(inner_type, str) else None, model_type)
    reader = ConfigReader(config, family.defaults if family else None)
    if family is not None:
        layers = family.build(reader)
    else:
        layers = hf_families.generic_layers(reader)
        if not hf_families.is_known_generic(reader.text_model_type, model_type):
            reader.note(f"model_type '{model_type}' is not one kvplan knows; read with the generic rules")

    max_positions = _max_positions(reader)
    rope = _rope_scaling(reader, max_positions)
    dtype = _dtype(reader)
    heads = reader.int_field(*HEAD_ALIASES, required=False)
    hidden = reader.hidden_size(required=False)
    vocab = reader.int_field(*VOCAB_ALIASES, required=False, maximum=MAX_VOCAB)
    windows = [layer.window for layer in layers if layer.kind == "sliding" and layer.window is not None]
    if windows and max_positions is not None and min(windows) >= max_positions:
        reader.note(f"sliding_window={min(windows)} >= max_position_embeddings={max_positions}: the window never binds")

    return ModelSpec(
        id=model_id,
        model_type=model_type,
        layers=group_layers(layers),
        dtype=dtype,  # type: ignore[arg-type]
        source=source,
        max_position_embeddings=max_positions,
        rope_scaling=rope,
        num_attention_heads=heads,
        hidden_size=hidden,
        vocab_size=vocab,
        mlp_width=_mlp_width(reader, hidden),
        assumptions=tuple(reader.assumptions),
    )


def _mlp_width(reader: ConfigReader, hidden: int | None) -> int | None:
    """The MLP width one token passes through: dense intermediate size, or top-k experts' width plus the
    shared experts for MoE (DeepSeek / GLM n_shared_experts, Qwen2-MoE shared_expert_intermediate_size)."""
    def num(*names: str) -> int | None:
        found = reader.raw(*names)
        if found is None or isinstance(found[1], bool) or not isinstance(found[1], (int, float)):
            return None
        return int(found[1]) if found[1] > 0 else None

    top_k = num("num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_topk")
    experts = num("num_local_experts", "num_experts", "n_routed_experts")
    if top_k and experts:
        expert_width = num("moe_intermediate_size", "intermediate_size")
        if expert_width is None:
            return None
        shared = num("shared_expert_intermediate_size") or (num("n_shared_experts") or 0) * expert_width
        return top_k * expert_width + shared
    dense = num("intermediate_size", "ffn_hidden_size", "n_inner", "d_ff", "ffn_dim")
    if dense is None and hidden is not None and reader.model_type in ("gpt2", "gptj", "gpt_neox", "bloom", "falcon"):
        dense = 4 * hidden  # these configs leave the 4x MLP implicit
    return dense


def spec_from_file(path: Path, *, model_id: str | None = None) -> ModelSpec:
    """Convenience: read a config file (or directory) and build its ModelSpec."""
    path = Path(path)
    config = read_config_file(path)
    return spec_from_config(config, model_id=model_id or path.stem, source=str(path))
