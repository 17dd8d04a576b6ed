"""Which models have a vision tower kvplan knows of, by name only: the model types and ids that
``vision_towers.py`` keys its towers by, and the multimodal families it has not recorded.

A text model's plan asks only this (``may_have_tower``) and never imports the tower table, whose shapes and
records cost a check's start-up ~0.5 ms; tests/test_vllm_encoder_profile.py holds these names to the table's keys.
"""

from __future__ import annotations

TOWER_TYPES = frozenset({"gemma3", "gemma4", "llama4", "kimi_vl", "mistral3", "qwen2_vl", "qwen2_5_vl", "qwen3_vl",
                         "qwen3_vl_moe"})
"""The model types ``vision_towers.TOWERS`` records a tower for."""
SMALL_TOWER_IDS = ("gemma-4-e2b", "gemma-4-e4b", "qwen3-vl-2b", "qwen3-vl-4b")
"""The id fragments ``vision_towers.SMALL_TOWERS`` names a smaller tower by (in its order)."""

# Multimodal families whose tower kvplan has not recorded (their processors make items of another size):
# named, so that a plan says the encoder is not modelled instead of leaving it out silently
UNRECORDED = frozenset({"qwen3_5", "qwen3_5_moe", "qwen2_5_omni",
                        "qwen3_omni_moe", "llava", "llava_next", "llava_onevision", "mllama", "internvl_chat",
                        "minicpmv", "phi3_v", "phi4mm", "idefics3", "smolvlm", "paligemma", "glm4v", "glm4v_moe",
                        "granite_vision", "aya_vision", "pixtral"})


def may_have_tower(model_type: str, model_id: str) -> bool:
    """Whether ``vision_towers.vision_tower`` may find a tower for the model, or the family is a multimodal one
    kvplan has not recorded: False only for a model an engine plans as text alone."""
    if model_type in TOWER_TYPES or model_type in UNRECORDED:
        return True
    lowered = model_id.lower()
    return any(key in lowered for key in SMALL_TOWER_IDS)
