"""Gemma 4 weights (kvplan.sources.hf_params ``_gemma4``) against the published checkpoints' sizes.

All four checkpoints are bfloat16 throughout (every tensor BF16, buffers included), so bytes = 2 x
the element count; ``count_params`` counts every stored element, persistent buffers included
(``layer_scalar``, the clip bounds of ``Gemma4ClippableLinear``, the vision ``std_bias`` /
``std_scale``). Sources ("find_string id N" is a file in the public-GitHub search index used while
writing this; the quoted value is what that file records):

- [E2B] github ohdearquant/lattice crates/inference/tests/fixtures/gemma4/e2b_tensor_manifest.json
  (@ 9de1520b): dtype and shape of all 2,011 tensors of the safetensors header of
  google/gemma-4-E2B-it @ 9dbdf8a839e4e9e0eb56ed80cc8886661d3817cf (single file, no index).
  Summed: 5,123,178,979 elements, all BF16 = 10,246,357,958 B. Buckets: language_model 4,648,449,891
  (embed_tokens_per_layer [262144, 8960] = 2,348,810,240), audio_tower 304,825,088 + embed_audio
  2,359,296, vision_tower 167,365,056 + embed_vision 1,179,648. The header still holds k_proj /
  v_proj / k_norm of the 20 kv-shared layers 15..34 (18,880,512 elements) that transformers 5.23
  skips on load; find_string id 63418043157 confirms 2,011 tensors.
- [E4B] find_string id 66417145570: a census of google/gemma-4-E4B-it's model.safetensors,
  "container file octets 15992595884 payload octets 15992314836 header octets 281040 tensors 2130".
- [31B] find_string id 68436559222: EXPECT '{"shared_tensors":1188, ..., "total_size":62546177752}'
  for CHAT_REPO=google/gemma-4-31B-it @ 842da3794eaa; id 70182148644: "@tensor_payload_bytes=62546177752",
  "@physical_tensor_count=1188".
- [26B] find_string id 70976838443: "safetensors headers of both shards at revision 4d7ae49" of
  google/gemma-4-26B-A4B-it: total 25,805,936,206 parameters, 51,611,872,412 BF16 bytes; experts
  22,837,985,280; vision tower + embed_vision 572,794,416; "model.safetensors.index.json says
  total_parameters: 26544131376, total_size: 51611872412" (that parameter figure counts the tied
  embedding twice, within 2,334). id 53175212908: the same index metadata.

Cross-check while writing this (not run here): transformers 5.23 ``Gemma4ForConditionalGeneration``
built on the meta device from these four configs has a state_dict (tied lm_head dropped) equal to
the counts below minus the kv-shared layers' k/v projections (E2B: tensor for tensor against [E2B]).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kvplan.sources.hf_params import count_params, weights_bytes
from conftest import DATA

G31 = DATA / "hf_configs" / "google__gemma-4-31B-it.json"
G26 = DATA / "hf_configs_transcribed" / "google__gemma-4-26B-A4B-it.json"
E4B = DATA / "hf_configs" / "google__gemma-4-E4B-it.json"
E2B = DATA / "hf_configs" / "google__gemma-4-E2B-it.json"


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# (config, checkpoint bytes, source); every tensor is BF16, so params = bytes / 2.
CHECKPOINTS = [
    (E2B, 10_246_357_958, "[E2B] header sum, 2,011 tensors"),
    (E4B, 15_992_314_836, "[E4B] payload octets, 2,130 tensors"),
    (G31, 62_546_177_752, "[31B] index.json total_size, 1,188 tensors"),
    (G26, 51_611_872_412, "[26B] index.json total_size = header sum"),
]


@pytest.mark.parametrize("path,checkpoint,source", CHECKPOINTS, ids=[c[0].stem for c in CHECKPOINTS])
def test_checkpoint_bytes_exact(path, checkpoint, source):
    config = load(path)
    count = count_params(config)
    size, how = weights_bytes(config, count)
    assert size == checkpoint, source
    assert count.total * 2 == checkpoint
    assert "bfloat16" in how
    assert not any("llama-like" in a or "tower not counted" in a for a in count.assumptions)


def test_e2b_components_match_the_header_buckets():
    by = count_params(load(E2B)).by_component
    # [E2B]: embed_tokens [262144, 1536] + embed_tokens_per_layer [262144, 35 x 256]
    assert by["embed"] == 262144 * 1536 + 262144 * 35 * 256 == 402_653_184 + 2_348_810_240
    assert by["audio"] == 304_825_088 + 2_359_296
    assert by["vision"] == 167_365_056 + 1_179_648
    assert by["lm_head"] == 0 and by["experts"] == 0


def test_e2b_kv_shared_layers_keep_their_kv_weights_in_the_checkpoint():
    count = count_params(load(E2B))
    # layers 15..34 are kv-shared: 16 sliding (head_dim 256) and 4 global (19, 24, 29, 34; 512), one KV
    # head each, hidden 1536: k_proj + v_proj + k_norm = [E2B]'s 18,880,512 extra elements.
    extra = 16 * (2 * 256 * 1536 + 256) + 4 * (2 * 512 * 1536 + 512)
    assert extra == 18_880_512
    assert any(f"{extra:,} parameters" in a and "transformers does not load them" in a
               for a in count.assumptions)
    # use_double_wide_mlp: the kv-shared layers' MLP is 2 x 6144 wide ([E2B] layer 15 gate_proj [12288, 1536])
    assert count.by_component["mlp"] == 3 * 1536 * 6144 * (15 + 2 * 20)


def test_26b_a4b_components():
    by = count_params(load(G26)).by_component
    # [26B]: "MoE experts (*.experts.gate_up_proj / down_proj, 60 tensors) 22,837,985,280"
    assert by["experts"] == 30 * 128 * 3 * 704 * 2816 == 22_837_985_280
    assert by["vision"] == 572_794_416
    assert by["audio"] == 0
    # router: proj (128 x 2816) + scale (2816) + per_expert_scale (128) per layer
    assert by["router"] == 30 * (128 * 2816 + 2816 + 128)
    # attention_k_eq_v: the 5 global layers (2 KV heads x 512) have no v_proj
    h = 2816
    sliding = 16 * 256 * h * 2 + 2 * 8 * 256 * h  # q + o, k + v
    full = 16 * 512 * h * 2 + 2 * 512 * h         # q + o, k only
    assert by["attention"] == 25 * sliding + 5 * full


def test_31b_k_eq_v_global_layers_have_no_v_proj():
    config = load(G31)
    k_eq_v = count_params(config).by_component["attention"]
    config["text_config"]["attention_k_eq_v"] = False  # global layers then take 16 KV heads and a v_proj
    plain = count_params(config).by_component["attention"]
    assert plain - k_eq_v == 10 * 5376 * (2 * 16 - 4) * 512  # 10 global layers: 4 -> 16 heads, + v_proj


def test_text_only_config_counts_the_decoder():
    full = count_params(load(E2B))
    text = load(E2B)["text_config"]
    count = count_params(text)
    assert count.total == full.total - full.by_component["vision"] - full.by_component["audio"]
    assert not any("tower not counted" in a for a in count.assumptions)


def test_towers_not_countable_are_noted_not_guessed():
    config = load(E2B)
    full = count_params(config)
    bare = copy.deepcopy(config)
    del bare["vision_config"]["position_embedding_size"]
    count = count_params(bare)
    assert count.by_component["vision"] == 0
    assert any("vision_config lacks position_embedding_size: vision tower not counted" in a
               for a in count.assumptions)
    assert count.total == full.total - full.by_component["vision"]

    bare = copy.deepcopy(config)
    bare["audio_config"] = {"model_type": "gemma4_audio", "hidden_size": 1024}
    count = count_params(bare)
    assert count.by_component["audio"] == 0
    assert any("audio_config lacks" in a and "audio tower not counted" in a for a in count.assumptions)

    bare = copy.deepcopy(config)
    del bare["audio_config"]
    assert any("without audio_config: audio tower not counted" in a
               for a in count_params(bare).assumptions)
    # audio_config: null (31B, 26B) is a model without audio: nothing to note
    assert not any("audio" in a for a in count_params(load(G31)).assumptions)


def test_clipped_linear_bounds_are_counted():
    config = load(E2B)
    clipped = count_params(config)
    config["vision_config"]["use_clipped_linears"] = False
    config["audio_config"]["use_clipped_linears"] = False
    plain = count_params(config)
    # 4 scalars per Gemma4ClippableLinear: vision 7 per layer x 16 layers, audio 10 per layer x 12
    assert clipped.total - plain.total == 4 * (7 * 16 + 10 * 12)
