"""Qwen3-Omni (``qwen3_omni_moe``): refused, naming the field.

Its config holds no decoder at the top or in ``text_config``: the language model is ``thinker_config.text_config``
(a Qwen3-MoE decoder), beside the thinker's audio and vision encoders and a ``talker_config`` speech model that
engines may load too. kvplan reads one text model per config; which of these an engine loads, and what their
encoders take at start-up, is not in that reading, so the config is refused instead of read as something else.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families.reader import ConfigReader
from kvplan.sources.families.registry import register
from kvplan.spec import LayerSpec


def qwen3_omni_layers(reader: ConfigReader) -> list[LayerSpec]:
    raise ConfigError(
        f"model_type '{reader.model_type}': the decoder is thinker_config.text_config, beside audio / vision encoders "
        "and a talker; kvplan reads no nested thinker model"
    )


register("qwen3_omni_moe", layers=qwen3_omni_layers)
