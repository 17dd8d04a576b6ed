"""Read a Hugging Face ``config.json`` into a :class:`~kvplan.spec.ModelSpec`.

The layers come from the family registry (``kvplan.sources.families``: one module per family, the
same reader for the layers and the parameter count); this module adds the model-wide fields (dtype,
positions, RoPE scaling, MLP width) and reads files. Every rule of thumb the reader had to apply is
recorded in ``ModelSpec.assumptions``; every config it cannot make sense of raises a one-line
``ConfigError`` naming the field and the value.

Entry points: :func:`spec_from_config`, :func:`spec_and_count` (one reader, both results),
:func:`read_config_file`, :func:`parse_json_object`, :func:`spec_from_file`.

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

from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.errors import ConfigError, NotFoundError
from kvplan.record import replace
from kvplan.sources.families.reader import (  # noqa: F401  (some re-exported: the reader used to live here)
    DTYPE_ALIASES,
    HEAD_ALIASES,
    HEAD_DIM_ALIASES,
    HIDDEN_ALIASES,
    KV_HEAD_ALIASES,
    LAYER_ALIASES,
    MAX_DIM,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    MODEL_DTYPES,
    POSITION_ALIASES,
    VOCAB_ALIASES,
    ConfigReader,
    json_kind,
    short,
)
from kvplan.spec import LayerSpec, ModelSpec, RopeScaling, SlidingWindow, group_layers

if TYPE_CHECKING:
    from kvplan.sources.families.tensors import ParamCount

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


# --------------------------------------------------------------------------------------------
# Model-wide fields


def _dtype(reader: ConfigReader) -> str:
    # the top level first, then text_config: vLLM config/model.py _find_dtype (0.11.0); a Qwen2.5-VL config says
    # float32 under text_config and bfloat16 at the top, and vLLM serves it in bfloat16
    for where in (reader.top, reader.cfg):
        for name in DTYPE_ALIASES:
            value = where.get(name)
            if value is None or value == "auto":
                continue
            if not isinstance(value, str):
                raise ConfigError(f"{name}={value!r} is not a dtype name")
            key = value.removeprefix("torch.").lower()
            if key in MODEL_DTYPES:
                return MODEL_DTYPES[key]
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
        raise ConfigError(f"{name}={short(params)} is not an object")
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
    """Build the ModelSpec a Hugging Face config describes (its MoE expert share from the same reading)."""
    return spec_and_count(config, model_id=model_id, source=source)[0]


def spec_and_count(config: dict, *, model_id: str,
                   source: str | None = None) -> tuple[ModelSpec, ParamCount | None, ConfigError | None]:
    """The ModelSpec and the parameter count of one config, from one reader of it.

    The count is ``None`` (with the reason) when the config describes the cache but cannot be
    counted. The spec's assumptions are :func:`spec_from_config`'s; the count's are its own notes
    plus any default only the count needed, as :func:`kvplan.sources.hf_params.count_params` gives.
    """
    from kvplan.sources import families

    reader, family = families.open_config(config)
    layers = families.layers_of(reader, family)
    mtp = families.mtp_layers_of(reader, family)  # read before the count's mark: its note is the description's
    spec = _spec(reader, layers, model_id=model_id, source=source, mtp_layers=mtp)
    mark = len(reader.assumptions)
    try:
        counter = families.tensors_of(reader, family)
        count = families.param_count(counter, reader.assumptions[mark:])
        if spec.num_experts and count.by_component.get("experts"):
            spec = replace(spec, routed_expert_params=count.by_component["experts"])
        return spec, count, None
    except ConfigError as exc:
        return spec, None, exc


def _spec(reader: ConfigReader, layers: list[LayerSpec], *, model_id: str, source: str | None,
          mtp_layers: int = 0) -> ModelSpec:
    max_positions = _max_positions(reader)
    rope = _rope_scaling(reader, max_positions)
    dtype = _dtype(reader)
    heads = reader.int_field(*HEAD_ALIASES, required=False)
    hidden = reader.hidden_size(required=False)
    vocab = reader.int_field(*VOCAB_ALIASES, required=False, maximum=MAX_VOCAB)
    windows = [layer.window for layer in layers if isinstance(layer, SlidingWindow)]
    if windows and max_positions is not None and min(windows) >= max_positions:
        reader.note(f"sliding_window={min(windows)} >= max_position_embeddings={max_positions}: the window never binds")
    mlp_width = _mlp_width(reader, hidden)
    experts, top_k = _experts(reader)
    return ModelSpec(
        id=model_id,
        model_type=reader.model_type,
        layers=group_layers(layers),
        dtype=dtype,  # type: ignore[arg-type]
        source=source,
        max_position_embeddings=max_positions,
        rope_scaling=rope,
        num_attention_heads=heads,
        hidden_size=hidden,
        vocab_size=vocab,
        mlp_width=mlp_width,
        num_experts=experts,
        experts_per_token=top_k,
        mtp_layers=mtp_layers,
        assumptions=tuple(reader.assumptions),
    )


def _count_field(reader: ConfigReader, *names: str) -> int | None:
    found = reader.raw(*names)
    if found is None or isinstance(found[1], bool) or not isinstance(found[1], (int, float)):
        return None
    return int(found[1]) if found[1] > 0 else None


_TOP_K = ("num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_topk")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")


def _experts(reader: ConfigReader) -> tuple[int | None, int | None]:
    """(routed experts, experts per token) of an MoE config; (None, None) for a dense one."""
    experts, top_k = _count_field(reader, *_EXPERTS), _count_field(reader, *_TOP_K)
    if experts and top_k and top_k <= experts:
        return experts, top_k
    return None, None


def _mlp_width(reader: ConfigReader, hidden: int | None) -> int | None:
    """The MLP width one token passes through: dense intermediate size, or top-k experts' width plus the
    shared experts for MoE (DeepSeek / GLM n_shared_experts, Qwen2-MoE shared_expert_intermediate_size)."""
    def num(*names: str) -> int | None:
        found = reader.raw(*names)
        if found is None or isinstance(found[1], bool) or not isinstance(found[1], (int, float)):
            return None
        return int(found[1]) if found[1] > 0 else None

    top_k = num(*_TOP_K)
    experts = num(*_EXPERTS)
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
