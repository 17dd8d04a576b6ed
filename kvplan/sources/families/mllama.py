"""Llama 3.2 Vision (mllama): refused, with the reason.

Its text model interleaves ``cross_attention_layers`` with the self-attention layers (Llama-3.2-11B-
Vision: 8 of its 40 ``num_hidden_layers``). A cross-attention layer caches the K/V of the image's
vision-encoder tokens, once per request and sized by the encoder output (tiles x patches), not by the
prompt: vLLM's V0 encoder-decoder runner gives each request a cross-attention block table of that
length beside its decoder block table, from the same pool. kvplan's layer kinds all grow with the
request's own tokens, so it cannot describe this cache; a reading of the 40 layers as plain attention
would look right per token and be wrong per request.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.spec import LayerSpec


def mllama_layers(reader: ConfigReader) -> list[LayerSpec]:
    cross = reader.cfg.get("cross_attention_layers")
    which = f" ({len(cross)} of {reader.num_layers()} layers)" if isinstance(cross, list) else ""
    raise ConfigError(
        f"model_type '{reader.model_type}': its cross-attention layers{which} cache the image encoder's "
        "tokens once per request, not the prompt's tokens; kvplan cannot model that cache"
    )


register("mllama", "mllama_text_model", layers=mllama_layers)
