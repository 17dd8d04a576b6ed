"""The one reader of a Hugging Face ``config.json``: field look-ups, validation, assumptions.

Every family module (``kvplan.sources.families.*``) reads its geometry through a
:class:`ConfigReader`, for the layers (``ModelSpec``) and for the parameter count alike, so a field
is looked up, defaulted and validated in one place. Field aliases are the names transformers'
config classes and their ``attribute_map``s accept; a family's ``defaults`` are its transformers
config-class defaults, each use of one recorded in ``assumptions``. Every value the reader cannot
make sense of raises a one-line ``ConfigError`` naming the field.

Only the standard library and kvplan's own pydantic-free modules are imported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from kvplan.errors import ConfigError
from kvplan.safe_io import json_kind  # noqa: F401  (read here by the config readers)
from kvplan.spec import ChunkedLocal, FullAttention, KVAttention, LayerSpec, SlidingWindow

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

MODEL_DTYPES = {
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
# The reader


class ConfigReader:
    """One config being read: field look-ups with validation, and the assumptions made."""

    def __init__(self, config: dict, defaults: dict[str, tuple[Any, str]] | None = None, *,
                 mha: bool = False) -> None:
        if not isinstance(config, dict):
            raise ConfigError(f"config is {json_kind(config)}, expected an object")
        self.top = config
        text = config.get("text_config")
        if text is not None and not isinstance(text, dict):
            raise ConfigError(f"text_config is {json_kind(text)}, expected an object")
        self.cfg: dict = text if text else config
        self.nested = self.cfg is not config
        self.model_type: str = model_type_of(config)
        inner = self.cfg.get("model_type") if self.nested else None
        self.text_model_type: str | None = inner if isinstance(inner, str) and inner else None
        # Family defaults (transformers config-class defaults) used when a field is absent.
        self.defaults: dict[str, tuple[Any, str]] = dict(defaults or {})
        # Multi-head attention family (gpt2, opt, ...): no KV-head field is expected, so none is noted.
        self.mha = mha
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

    def kv_heads(self, *, mha_family: bool | None = None) -> int:
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
            if not (self.mha if mha_family is None else mha_family):
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

    def mtp_layers(self, absent: int = 0, why: str = "") -> int:
        """``num_nextn_predict_layers``: the multi-token-prediction layers the checkpoint ships beside its
        decoder layers. The engines read this field for their MTP drafts (vLLM
        ``SpeculativeConfig.hf_config_override``, per model type; SGLang ``ModelConfig``; TensorRT-LLM's
        MTP config; transformers' ``num_mtp_layers`` maps to it). Absent: ``absent`` (0 but for a family
        whose checkpoints ship MTP layers their config does not count, said with ``why``)."""
        found = self.raw("num_nextn_predict_layers")
        if found is not None:
            return self.int_of(found[0], found[1], maximum=MAX_LAYERS, minimum=0)
        if absent and why:
            self.note(why)
        return absent

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

    def attention(self, *, window: int | None = None, chunk: int | None = None,
                  mha_family: bool | None = None) -> KVAttention:
        """A K/V attention layer of the config's heads: sliding with a ``window``, chunked with a ``chunk``,
        else full."""
        kv = self.kv_heads(mha_family=mha_family)
        hd = self.head_dim()
        if window is not None:
            return SlidingWindow(kv_heads=kv, head_dim=hd, window=window)
        if chunk is not None:
            return ChunkedLocal(kv_heads=kv, head_dim=hd, chunk=chunk)
        return FullAttention(kv_heads=kv, head_dim=hd)

    def uniform_attention(self, *, mha_family: bool | None = None) -> list[LayerSpec]:
        """No layer_types: one window (or none) for every layer, as transformers' DynamicCache does."""
        n = self.num_layers()
        window = self.sliding_window()
        if window is None:
            return [self.attention(mha_family=mha_family)] * n
        return [self.attention(window=window, mha_family=mha_family)] * n

    def layer_types(self) -> list[str] | None:
        types = self.cfg.get("layer_types")
        if types is None:
            return None
        n = self.num_layers()
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ConfigError(f"layer_types={short(types)} is not a list of strings")
        if len(types) != n:
            raise ConfigError(f"layer_types has {len(types)} entries but num_hidden_layers={n}")
        return types

    def layers_from_types(self, types: list[str], *, window_fields: tuple[str, ...] = ("sliding_window",),
                          recurrent: Callable[[str], LayerSpec] | None = None,
                          mha_family: bool | None = None) -> list[LayerSpec]:
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
            return self.attention(window=window, mha_family=mha_family)
        if layer_type in _CHUNKED_TYPES:
            chunk = self.int_field("attention_chunk_size", required=False, maximum=MAX_POSITIONS)
            if chunk is None:
                raise ConfigError(f"layer_types[{index}]='{layer_type}' but the config has no attention_chunk_size")
            return self.attention(chunk=chunk, mha_family=mha_family)
        if layer_type in _RECURRENT_TYPES:
            if recurrent is None:
                raise ConfigError(
                    f"layer_types[{index}]='{layer_type}': kvplan does not know the state of "
                    f"model_type '{self.model_type}' {layer_type} layers"
                )
            return recurrent(layer_type)
        raise ConfigError(f"layer_types[{index}]='{layer_type}' is not a layer type kvplan knows")


def short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def model_type_of(config: dict) -> str:
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


