"""Vision towers of the multimodal model families kvplan plans: their shape, and the largest item an engine's
processor feeds them (what vLLM's profiling run encodes, kvplan/engines/vllm/encoder_profile.py; SGLang's
fraction rule reads the layers and width only, kvplan/engines/sglang/fraction.py).

A ModelSpec keeps the model type and id, not the checkpoint's vision_config, so the towers are recorded here by
model type (read in tests/data/hf_configs and the checkpoints' preprocessor configs, as each entry says).
"""

from __future__ import annotations

from kvplan.record import dataclass, replace


@dataclass(frozen=True)
class VisionTower:
    layers: int
    hidden: int
    """vision_config's num_hidden_layers and hidden_size."""
    mlp: int = 0
    """The tower's MLP width (vision_config intermediate_size); 0: not recorded."""
    patch_values: int = 0
    """Pixel values per patch: channels x patch^2 (x the temporal patch, where the processor has one)."""
    patches_per_item: int = 0
    """Patches the encoder sees for the largest item the processor makes (vLLM's dummy image); 0: not derived."""
    tokens_per_item: int = 0
    """Prompt tokens vLLM counts for that item (``get_mm_max_tokens_per_item``: what divides the encoder budget)."""
    embeds_per_item: int = 0
    """Text-model embeddings the encoder returns for it (0: ``tokens_per_item``; fewer where the prompt also
    holds separator or timestamp tokens)."""
    masked_attention: bool = False
    """The encoder attends over all the batch's patches at once with a dense patches x patches mask (not a
    kernel over per-image lengths)."""
    transformers_tower: str = ""
    """Where vLLM runs the tower as Hugging Face transformers' module (AutoModel.from_config), what in it sets the
    peak: it follows the transformers release installed, not vLLM's code."""
    where: str = ""
    """Where the figures come from."""

    @property
    def embeds(self) -> int:
        return self.embeds_per_item or self.tokens_per_item

    @property
    def profiled(self) -> bool:
        return self.patches_per_item > 0 and self.tokens_per_item > 0 and self.mlp > 0


# SigLIP-So400m at 896 x 896, patch 14 (google/gemma-3-*-it vision_config; Gemma 3 4B, 12B and 27B ship the same
# tower): 64 x 64 = 4,096 patches, average-pooled 4 x 4 to mm_tokens_per_image 256 (vLLM gemma3_mm.py
# get_num_image_tokens: (num_crops + 1) x 256, no crops with pan-and-scan off, its default; the dummy image is
# resized to 896 x 896). Read in 0.19.0, 0.21.0, 0.25.1, 0.33.0; the 0.19.0 H100 logs print 32 items of 8,192 tokens
GEMMA3 = VisionTower(27, 1152, 4304, 3 * 14 * 14, 64 * 64, 256, where=(
    "SigLIP 896 px / patch 14 pooled to 256 tokens (vLLM gemma3_mm.py get_num_image_tokens)"))
# Gemma 4 (gemma4_vision: patch 16, pooling 3 x 3; google/gemma-4-31B-it, -26B-A4B-it (27, 1152, 4304),
# -E2B-it / -E4B-it (16, 768, 3072)): vLLM gemma4_mm.py get_mm_max_tokens_per_item gives image 280, video
# _VIDEO_MAX_FRAMES 32 x (_VIDEO_MAX_SOFT_TOKENS 70 + 2 + 6) = 2,496 (audio, E2B/E4B, audio_seq_length: fewer), so
# the dummy batch is videos: get_dummy_mm_data makes 32 frames of 224 x 224 (the image processor's size is None),
# each fitted to 70 x 3^2 = 630 patches by _compute_num_soft_tokens (384 x 384 px: 576 patches, 64 embeddings) and
# padded to 630 patch slots. Read in 0.19.0, 0.21.0, 0.25.1, 0.33.0 (the same constants and dummy). The tower is
# transformers' (gemma4_mm.py: AutoModel.from_config): from 0.25 vLLM encodes frames in chunks sized for
# Gemma4VisionPatchEmbedder's F.one_hot position transient, (frames, patches, 2, 10240) int64 (_encoder_chunk); the
# transformers 5.24 wheel looks positions up with F.embedding instead
GEMMA4 = VisionTower(27, 1152, 4304, 3 * 16 * 16, 32 * 630, 32 * (70 + 2 + 6), 32 * 64, where=(
    "a 32-frame 224 px dummy video, 630 patch slots and 64 embeddings a frame (vLLM gemma4_mm.py "
    "get_mm_max_tokens_per_item, get_dummy_mm_data, _compute_num_soft_tokens)"), transformers_tower=(
    "Gemma4VisionPatchEmbedder's position transient (an F.one_hot of 160 KiB a patch in some transformers releases; "
    "vLLM gemma4_mm.py _encoder_chunk)"))
GEMMA4_SMALL = replace(GEMMA4, layers=16, hidden=768, mlp=3072)
# Llama 4 (meta-llama/Llama-4-Scout/Maverick vision_config): 336 px tiles, patch 14 (576 patches + 1 class
# embedding), pixel shuffle 0.5 to 144 tokens a tile; vLLM mllama4.py get_image_size_with_most_features: a 16 x 1
# tile image (image processor max_patches 16), plus the global tile = 17 chunks
LLAMA4 = VisionTower(34, 1408, 5632, 3 * 14 * 14, 17 * 577, 17 * 144, where=(
    "17 tiles of 336 px (max_patches 16 + the global tile), 144 tokens each (vLLM mllama4.py "
    "get_image_size_with_most_features, get_patch_per_chunk)"))
# MoonViT (moonshotai/Kimi-VL-A3B-Instruct vision_config, patch 14, merge 2 x 2; preprocessor in_token_limit 4096
# patches): vLLM kimi_vl.py's dummy image is 1024 x 1024 (MaxImageTokenMeta), scaled to 897 x 897 to fit 4,096
# patches, padded to 924 x 924: 66 x 66 = 4,356 patches, 33 x 33 = 1,089 tokens (get_num_image_tokens)
KIMI_VL = VisionTower(27, 1152, 4304, 3 * 14 * 14, 66 * 66, 33 * 33, where=(
    "MoonViT: a 1024 px dummy image fitted to 4,096 patches, 4,356 patches padded, 1,089 tokens (vLLM kimi_vl.py "
    "MaxImageTokenMeta, get_num_image_tokens)"))
# Pixtral's tower in Mistral 3 (Mistral-Small-3.1-24B-Instruct-2503 vision_config: 1540 px, patch 14, spatial
# merge 2): 110 x 110 = 12,100 patches, 55 x 55 = 3,025 image embeddings (the [IMG_BREAK] / [IMG_END] tokens are
# not embeddings). Without xformers (not a vLLM dependency) vLLM pixtral.py PixtralHFVisionModel.forward builds
# transformers' generate_block_attention_mask over every patch of the batch: a dense patches^2 mask
MISTRAL3 = VisionTower(24, 1024, 4096, 3 * 14 * 14, 110 * 110, 55 * 55, masked_attention=True, where=(
    "Pixtral 1540 px / patch 14, merged 2 x 2 to 3,025 embeddings, dense block mask without xformers (vLLM "
    "mistral3.py get_image_size_with_most_features, pixtral.py PixtralHFVisionModel.forward)"))

TOWERS: dict[str, VisionTower] = {"gemma3": GEMMA3, "gemma4": GEMMA4, "llama4": LLAMA4, "kimi_vl": KIMI_VL,
                                  "mistral3": MISTRAL3}
SMALL_TOWERS: dict[str, VisionTower] = {"gemma-4-e2b": GEMMA4_SMALL, "gemma-4-e4b": GEMMA4_SMALL}

# Multimodal families whose tower kvplan has not recorded (their processors make items of another size):
# named, so that a plan says the encoder is not modelled instead of leaving it out silently
UNRECORDED = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen2_5_omni",
                        "qwen3_omni_moe", "llava", "llava_next", "llava_onevision", "mllama", "internvl_chat",
                        "minicpmv", "phi3_v", "phi4mm", "idefics3", "smolvlm", "paligemma", "glm4v", "glm4v_moe",
                        "granite_vision", "aya_vision", "pixtral"})


def vision_tower(model_type: str, model_id: str) -> VisionTower | None:
    """The model's vision tower where kvplan records one (a smaller tower named by the id first), else None."""
    lowered = model_id.lower()
    small = next((tower for key, tower in SMALL_TOWERS.items() if key in lowered), None)
    return small or TOWERS.get(model_type)
