"""Gemma 1, 2, 3 and 3n (Gemma 4 has its own module), and the Cohere families sharing their patterns.

Layers: sliding and global layers alternate by a pattern (``layer_types`` when the config lists
them). Parameters: the llama-like rule with Gemma's norms; every Gemma config class defaults
``tie_word_embeddings`` to True.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.llama import LlamaStyle, generic_layers, llama_like, styled
from kvplan.sources.families.reader import ConfigReader
from kvplan.spec import LayerSpec, SharedKV
from kvplan.sources.families.registry import register


def every_nth_global(reader: ConfigReader, default: int, family: str) -> list[LayerSpec]:
    """``layer_types`` if given, else sliding layers with every ``sliding_window_pattern``-th global."""
    types = reader.layer_types()
    if types is None:
        found = reader.raw("sliding_window_pattern", "_sliding_window_pattern")
        if found is None:
            pattern = default
            reader.note(f"sliding_window_pattern absent: transformers {family} default {default} "
                        f"({default - 1} local : 1 global)")
        else:
            pattern = reader.int_of(found[0], found[1], maximum=100_000)
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(reader.num_layers())]
    return reader.layers_from_types(types)


def kv_shared_tail(reader: ConfigReader, layers: list[LayerSpec], types: list[str]) -> list[LayerSpec]:
    """The last ``num_kv_shared_layers`` layers compute no K/V and read the cache of the last earlier
    non-shared layer of their own type (Gemma 3n / 4: transformers ``is_kv_shared_layer`` and no
    ``past_key_values.update``; vLLM ``kv_sharing_target_layer_name``, so no KV cache of their own)."""
    n = len(layers)
    found = reader.raw("num_kv_shared_layers")
    shared = reader.int_of("num_kv_shared_layers", found[1], minimum=0, maximum=n) if found else 0
    if shared == 0:
        return layers
    first_shared = n - shared
    out = layers[:first_shared]
    for index in range(first_shared, n):
        owners = [j for j in range(first_shared) if types[j] == types[index]]
        if not owners:
            raise ConfigError(f"num_kv_shared_layers={shared}: layer {index} ({types[index]}) has no earlier "
                              "non-shared layer of its type to share with")
        out.append(SharedKV(shares_with=owners[-1]))
    reader.note(f"the last {shared} layers reuse earlier layers' KV cache (num_kv_shared_layers)")
    return out


def gemma2_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gemma2.py: layer_types default = sliding when (i + 1) % 2, i.e. even layers
    # slide (window 4096), odd layers are global. Early configs also carry sliding_window_size.
    types = reader.layer_types()
    if types is None:
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(reader.num_layers())]
    return reader.layers_from_types(types, window_fields=("sliding_window", "sliding_window_size"))


def gemma3_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gemma3.py: layer_types default = sliding when (i + 1) % sliding_window_pattern
    # (pattern 6: 5 local : 1 global); the pattern used to be saved as sliding_window_pattern or
    # _sliding_window_pattern.
    return every_nth_global(reader, 6, "Gemma3")


def gemma3n_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_gemma3n.py / modeling_gemma3n.py: the last num_kv_shared_layers layers compute
    # no K/V (kv_shared_tail); transformers' cache leaves them out (cache_utils: num_kv_shared_layers).
    types = reader.layer_types()
    if types is None:
        raise ConfigError("gemma3n config has no layer_types")
    return kv_shared_tail(reader, reader.layers_from_types(types), types)


_GEMMA3_DEFAULTS = {
    # transformers Gemma3TextConfig defaults; gemma-3-4b/12b Hub configs leave some of these out.
    "num_attention_heads": (8, "transformers Gemma3TextConfig"),
    "num_key_value_heads": (4, "transformers Gemma3TextConfig"),
    "head_dim": (256, "transformers Gemma3TextConfig"),
    "sliding_window": (4096, "transformers Gemma3TextConfig"),
    "max_position_embeddings": (131072, "transformers Gemma3TextConfig"),
    "num_hidden_layers": (26, "transformers Gemma3TextConfig"),
}
_FOUR_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
               "post_feedforward_layernorm")

register("gemma", layers=generic_layers, params=llama_like, tied_by_default=True)
register("gemma2", layers=gemma2_layers, params=styled(LlamaStyle(norms=_FOUR_NORMS)), tied_by_default=True,
         defaults={"head_dim": (256, "transformers Gemma2Config"),
                   "sliding_window": (4096, "transformers Gemma2Config")})
# modeling_gemma3.py: q_norm / k_norm of head_dim and four norms per layer.
register("gemma3_text", "gemma3", layers=gemma3_layers, tied_by_default=True, defaults=_GEMMA3_DEFAULTS,
         params=styled(LlamaStyle(qk_norm="head", norms=_FOUR_NORMS)))
register("gemma3n_text", "gemma3n", layers=gemma3n_layers)


# --------------------------------------------------------------------------------------------
# Cohere (Command R): one LayerNorm per layer (parallel attention and MLP), q/k norms per head
# with use_qk_norm (modeling_cohere.py); Cohere2 adds Gemma-3-style sliding layers.


def cohere2_layers(reader: ConfigReader) -> list[LayerSpec]:
    # configuration_cohere2.py: layer_types default = sliding when (i + 1) % sliding_window_pattern
    # (default 4: 3 local : 1 global).
    return every_nth_global(reader, 4, "Cohere2")


_COHERE = LlamaStyle(qk_norm="per_head_if_flag", norms=("input_layernorm",))
register("cohere", layers=generic_layers, params=styled(_COHERE), tied_by_default=True)
register("cohere2", layers=cohere2_layers, params=styled(_COHERE), tied_by_default=True,
         defaults={"sliding_window": (4096, "transformers Cohere2Config")})
