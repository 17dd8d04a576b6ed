"""Vision towers of multimodal configs that have no tower rule of their own (gemma3, llama4, others).

Counted from ``vision_config`` for the families whose checkpoints kvplan has checked (SigLIP with
gemma3's projector, Llama 4's vision model); any other tower as a generic pre-LN ViT plus one
projection, which the count says is approximate.
"""

from __future__ import annotations

from kvplan.sources.families.tensors import Counter


def vision_tower(b: Counter) -> None:
    vc = b.top.get("vision_config")
    if not isinstance(vc, dict):
        if b.cfg is not b.top:
            b.note("multimodal config without vision_config: vision tower not counted")
        return
    try:
        vh = int(vc["hidden_size"])
        vl = int(vc["num_hidden_layers"])
        vi = int(vc["intermediate_size"])
        patch = int(vc["patch_size"])
        image = int(vc["image_size"])
        chans = int(vc.get("num_channels", 3))
    except (KeyError, TypeError, ValueError):
        b.note("vision_config lacks hidden/layer/intermediate/patch/image sizes: vision tower not counted")
        return
    th = b.hidden
    vt = vc.get("model_type", "")
    grid = (image // patch) ** 2
    # Pre-LN ViT block: q/k/v/o with biases, fc1/fc2 with biases, two LayerNorms (weight + bias).
    per_layer = 4 * (vh * vh + vh) + 2 * vh * vi + vi + vh + 4 * vh
    if vt == "siglip_vision_model":
        # transformers modeling_siglip.py: Conv2d patch embedding (bias), learned position embedding per
        # patch, encoder, post_layernorm; gemma3's projector (modeling_gemma3.py
        # Gemma3MultiModalProjector): mm_input_projection_weight (vision h x text h) + mm_soft_emb_norm.
        b.add("vision", "vision_tower.patch_embedding", vh, chans, patch, patch)
        b.add("vision", "vision_tower.patch_embedding.bias", vh)
        b.add("vision", "vision_tower.position_embedding", grid, vh)
        b.add("vision", "vision_tower.layers", per_layer, count=vl)
        b.add("vision", "vision_tower.post_layernorm", 2 * vh)
        if vc.get("vision_use_head"):
            b.note("siglip vision_use_head: attention-pooling head not counted")
        if b.model_type == "gemma3":
            b.add("vision", "multi_modal_projector.mm_input_projection_weight", vh, th)
            b.add("vision", "multi_modal_projector.mm_soft_emb_norm", vh)
        else:
            b.note("vision projector of this family not counted")
    elif vt == "llama4_vision_model":
        # transformers modeling_llama4.py Llama4VisionModel: unfold patch embedding (bias-free Linear
        # C*p*p -> h), class embedding, positional embedding (grid + 1), layernorm_pre/post, encoder,
        # pixel-shuffle adapter MLP (h / ratio^2 -> projector_input_dim -> projector_output_dim, no
        # bias), multi_modal_projector.linear_1 (vision_output_dim -> text h, no bias).
        ratio = float(vc.get("pixel_shuffle_ratio", 0.5))
        b.add("vision", "vision_model.patch_embedding", vh, chans * patch * patch)
        b.add("vision", "vision_model.class_embedding", vh)
        b.add("vision", "vision_model.positional_embedding_vlm", grid + 1, vh)
        b.add("vision", "vision_model.layernorm_pre_post", 4 * vh)
        b.add("vision", "vision_model.model.layers", per_layer, count=vl)
        p_in = int(vc.get("projector_input_dim", vh))
        p_out = int(vc.get("projector_output_dim", p_in))
        b.add("vision", "vision_model.vision_adapter.mlp.fc1", p_in, int(vh / (ratio * ratio)))
        b.add("vision", "vision_model.vision_adapter.mlp.fc2", p_out, p_in)
        b.add("vision", "multi_modal_projector.linear_1", th, int(vc.get("vision_output_dim", p_out)))
    else:
        b.add("vision", "vision_tower.patch_embedding", vh, chans * patch * patch + 1)
        b.add("vision", "vision_tower.position_embedding", grid, vh)
        b.add("vision", "vision_tower.layers", per_layer, count=vl)
        b.add("vision", "multi_modal_projector", th, vh)
        b.note(f"vision tower ({vt or 'unknown type'}) counted as a generic pre-LN ViT plus one "
               "projection to the text width (approximate)")
