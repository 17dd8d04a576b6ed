"""The Hugging Face Hub source, through the real huggingface_hub client against a Hub on 127.0.0.1.

kvplan runs in a subprocess (``python -m kvplan``) because huggingface_hub reads HF_ENDPOINT,
HF_HOME and HF_HUB_OFFLINE when it is imported. The fixture Hub (tests/hub_server.py) serves the
repos of tests/data/hub/repos.json and records every byte and range it serves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hub_server import TOKEN, FakeHub

from kvplan.errors import ConfigError
from kvplan.sources.hf_params import count_params, weights_bytes
from kvplan.sources.hub import (
    config_from_mistral_params,
    pick_safetensors,
    split_revision,
)
from kvplan.sources.safetensors_weights import combine, quant_scheme, summarize_header
from conftest import DATA, REPO

pytestmark = pytest.mark.slow  # a Hub server on 127.0.0.1 and a kvplan process per test
LLAMA70 = "meta-llama/Llama-3.1-70B"


@pytest.fixture(scope="module")
def server():
    hub = FakeHub().start()
    yield hub
    hub.stop()


@pytest.fixture
def hub(server, tmp_path):
    server.reset()
    server.home = tmp_path / "hf-home"  # type: ignore[attr-defined]
    return server


def kvplan(hub: FakeHub, *args: str, token: str | None = None, offline: bool = False,
           **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_", "HUGGING"))}
    clean.update(HF_ENDPOINT=hub.url, HF_HOME=str(hub.home), HF_HUB_DISABLE_TELEMETRY="1",  # type: ignore[attr-defined]
                 KVPLAN_HUB_RETRY_DELAY="0.01", **env)
    if token is not None:
        clean["HF_TOKEN"] = token
    if offline:
        clean["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "kvplan", *args], check=False, env=clean, capture_output=True, text=True,
                          cwd=REPO, timeout=60)


def as_json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("kvplan: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and TOKEN not in done.stderr
    return done.stderr


def as_spec(done: subprocess.CompletedProcess) -> dict:
    import yaml

    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def config(name: str) -> dict:
    return json.loads((DATA / name).read_text())


# ------------------------------------------------------------------------------------------------
# Through the fixture Hub


def test_30_shard_model_reads_only_headers(hub):
    data = as_json(kvplan(hub, "estimate", LLAMA70, "--hub", "-c", "8k", "-f", "json", token=TOKEN))
    model = data["model"]
    # Llama-3.1-70B: 70,553,706,496 bf16 parameters = the index's total_size 141,107,412,992 bytes.
    assert model["params"] == 70_553_706_496 == count_params(config("hf_configs/meta-llama__Llama-3.1-70B.json")).total
    assert model["weights_bytes"] == 141_107_412_992
    assert data["rows"][0]["kv_bytes"] == 80 * 8 * 128 * 2 * 2 * 8192
    shards = {s.path for s in hub.log if s.path.endswith(".safetensors")}
    assert len(shards) == 30
    assert hub.weight_data_requests == []  # no byte past any header, no whole-file GET
    assert all(s.method == "GET" and s.range is not None for s in hub.log if s.path.endswith(".safetensors"))
    assert not hub.requested("model.safetensors.index.json")
    assert hub.bytes_served() <= 100 * 1024, hub.bytes_served()


def test_offline_gives_the_same_answer_from_the_cache(hub):
    args = ("estimate", LLAMA70, "--hub", "-c", "8k,32k", "-b", "1,4", "-f", "json")
    online = as_json(kvplan(hub, *args, token=TOKEN))
    hub.log.clear()
    offline = as_json(kvplan(hub, *args, offline=True))
    assert hub.log == []
    assert offline["rows"] == online["rows"] and offline["model"] == online["model"]
    assert any("cached in" in a and "kvplan" in a for a in offline["assumptions"])
    # Online again: the header summary is reused, only the repo info and the config's ETag are asked.
    hub.log.clear()
    again = as_json(kvplan(hub, *args, token=TOKEN))
    assert again["model"] == online["model"]
    assert not any(s.path.endswith(".safetensors") for s in hub.log)


def test_offline_and_not_cached(hub):
    err = one_line_error(kvplan(hub, "estimate", "Qwen/Qwen3-32B-FP8", "--hub", offline=True))
    assert "HF_HUB_OFFLINE" in err and "not in the HF cache" in err and "kvplan spec" in err
    assert hub.log == []


def test_spec_pins_a_hub_model_for_offline_ci(hub, tmp_path):
    done = kvplan(hub, "spec", "Qwen/Qwen3-32B-FP8", "--hub")
    text, spec = done.stdout, as_spec(done)
    sha = hub.repos["Qwen/Qwen3-32B-FP8"].refs["main"]
    assert spec["revision"] == sha and spec["source"] == "Qwen/Qwen3-32B-FP8"
    assert spec["weights_bytes"] == 34_326_243_328 and spec["weights_dtype"] == "fp8"
    assert spec["weights_source"].startswith(f"safetensors headers of Qwen/Qwen3-32B-FP8@{sha}")
    pinned = tmp_path / "qwen3-32b-fp8.yaml"
    pinned.write_text(text)
    hub.log.clear()
    from_file = as_json(kvplan(hub, "estimate", str(pinned), "-c", "32k", "-f", "json", offline=True))
    from_hub = as_json(kvplan(hub, "estimate", "Qwen/Qwen3-32B-FP8", "--hub", "-c", "32k", "-f", "json"))
    assert from_file["rows"] == from_hub["rows"]
    assert from_file["model"]["weights_bytes"] == from_hub["model"]["weights_bytes"] == 34_326_243_328


def test_quantized_checkpoints_bytes_from_headers(hub, tmp_path):
    # fp8 with 128x128 block scales: the header total equals the block-scale rule of hf_params.
    fp8 = config("hf_configs/Qwen__Qwen3-32B-FP8.json")
    data = as_json(kvplan(hub, "estimate", "Qwen/Qwen3-32B-FP8", "--hub", "-c", "1k", "-f", "json"))
    assert data["model"]["weights_bytes"] == weights_bytes(fp8)[0] == 34_326_243_328
    assert data["model"]["params"] == count_params(fp8).total
    # AWQ int4: qweight int32 = 8 parameters each; scales and zeros counted as bytes only.
    awq = config("hub/Qwen__Qwen2.5-7B-Instruct-AWQ.json")
    spec = as_spec(kvplan(hub, "spec", "Qwen/Qwen2.5-7B-Instruct-AWQ"))
    assert spec["params"] == count_params(awq).total and spec["weights_dtype"] == "int4"
    assert spec["weights_bytes"] == 5_570_747_392  # packed int4 + fp16 scales + int32 zeros + fp16 rest
    assert any("hold 8 4-bit values each" in a for a in spec["assumptions"])
    # MXFP4 (gpt-oss): U8 blocks = 2 values per byte, U8 scales one per 32.
    oss = config("hf_configs/openai__gpt-oss-20b.json")
    spec = as_spec(kvplan(hub, "spec", "openai/gpt-oss-20b", "--hub"))
    assert spec["params"] == count_params(oss).total
    assert spec["weights_bytes"] == weights_bytes(oss)[0] and spec["weights_dtype"] == "mxfp4"
    assert "(3 files," in spec["weights_source"]  # model-00000-of-00002 .. model-00002-of-00002
    assert hub.weight_data_requests == []


def test_revision_in_the_id_and_as_an_option(hub):
    repo = hub.repos["Qwen/Qwen3-0.6B"]
    old = as_spec(kvplan(hub, "spec", "Qwen/Qwen3-0.6B@v0.9"))
    assert old["revision"] == repo.refs["v0.9"] and old["max_position_embeddings"] == 32768
    new = as_spec(kvplan(hub, "spec", "Qwen/Qwen3-0.6B", "--revision", "main"))
    assert new["revision"] == repo.refs["main"] and new["max_position_embeddings"] == 40960
    by_sha = as_spec(kvplan(hub, "spec", f"Qwen/Qwen3-0.6B@{repo.refs['v0.9']}"))
    assert by_sha["max_position_embeddings"] == 32768
    err = one_line_error(kvplan(hub, "estimate", "Qwen/Qwen3-0.6B", "--revision", "no-such-branch"))
    assert "revision 'no-such-branch' of Qwen/Qwen3-0.6B does not exist" in err
    # Offline, the revision resolves through the HF cache's refs.
    offline = as_spec(kvplan(hub, "spec", "Qwen/Qwen3-0.6B@v0.9", offline=True))
    assert offline["revision"] == repo.refs["v0.9"] and offline["weights_bytes"] == old["weights_bytes"]


def test_bundled_ids_stay_offline_unless_hub_is_asked(hub):
    done = kvplan(hub, "estimate", "Qwen/Qwen3-0.6B", "-c", "1k", "-f", "json")
    assert done.returncode == 0 and hub.log == []
    done = kvplan(hub, "estimate", "Qwen/Qwen3-0.6B", "--hub", "-c", "1k", "-f", "json")
    assert json.loads(done.stdout)["model"]["weights_bytes"] == 1_192_099_840 and hub.log


def test_gated_private_and_missing(hub):
    err = one_line_error(kvplan(hub, "estimate", LLAMA70, "--hub"))
    assert LLAMA70 in err and "gated" in err and "no token is set" in err and "HF_TOKEN" in err
    err = one_line_error(kvplan(hub, "estimate", LLAMA70, "--hub", token="hf_wrong"))
    assert "gated" in err and "has no access" in err and "hf_wrong" not in err
    err = one_line_error(kvplan(hub, "estimate", "kvplan-test/private-llama"))
    assert "not a file or a bundled model" in err and "private" in err and "HF_TOKEN" in err
    ok = kvplan(hub, "estimate", "kvplan-test/private-llama", "-c", "1k", "-f", "json", token=TOKEN)
    assert as_json(ok)["model"]["params"] == count_params(config("hf_configs/meta-llama__Llama-3.2-1B-Instruct.json")).total
    err = one_line_error(kvplan(hub, "estimate", "meta-llama/Llama-3.1-8B-Instruct-nope"))
    assert "the Hub has no public model" in err and "did you mean" in err and "meta-llama/Llama-3.1-8B-Instruct," in err  # as the id is spelled


def test_server_errors_are_retried_then_reported(hub):
    ok = kvplan(hub, "estimate", "kvplan-test/flaky", "-c", "1k", "-f", "json")  # two 503s, then answers
    assert as_json(ok)["rows"][0]["kv_bytes"] == 28 * 8 * 128 * 2 * 2 * 1024
    assert sum(s.status == 503 for s in hub.log) == 2
    hub.log.clear()
    err = one_line_error(kvplan(hub, "estimate", "kvplan-test/down"))
    assert "HTTP 503 after 3 tries" in err
    assert sum(s.status == 503 for s in hub.log) == 3
    # a timeout is not asked again: a Hub that does not answer in KVPLAN_HUB_TIMEOUT is reported at once
    hub.log.clear()
    err = one_line_error(kvplan(hub, "estimate", "kvplan-test/slow", KVPLAN_HUB_TIMEOUT="0.2", KVPLAN_HUB_TRIES="2"))
    assert "did not answer within KVPLAN_HUB_TIMEOUT (0.2 s; timeout)" in err


def test_bad_files_and_fallbacks(hub):
    err = one_line_error(kvplan(hub, "estimate", "kvplan-test/truncated-config"))
    assert "config.json" in err and "invalid JSON" in err and "truncated" in err
    data = as_json(kvplan(hub, "estimate", "kvplan-test/no-safetensors", "-c", "1k", "-f", "json"))
    assert data["model"]["params"] == count_params(config("hf_configs/Qwen__Qwen3-0.6B.json")).total
    assert any("no safetensors" in a and "analytic count" in a for a in data["assumptions"])
    # Mistral's native params.json + consolidated.safetensors: Mistral-7B-v0.3's 7,248,023,552 parameters.
    data = as_json(kvplan(hub, "estimate", "kvplan-test/mistral-params-only", "-c", "4k", "-f", "json"))
    assert data["model"]["params"] == 7_248_023_552 and data["model"]["layer_kinds"] == {"full": 32}
    assert data["rows"][0]["kv_bytes"] == 32 * 8 * 128 * 2 * 2 * 4096
    assert any("params.json" in a for a in data["assumptions"])


def test_json_stdout_stays_clean_and_hub_is_imported_lazily(hub):
    done = kvplan(hub, "estimate", "kvplan-test/flaky", "-c", "1k", "-f", "json")
    json.loads(done.stdout)  # nothing but JSON on stdout (progress is stderr-only, and only on a TTY)
    assert done.stderr == ""


# ------------------------------------------------------------------------------------------------
# Header summaries without a server


def _header(*tensors: tuple[str, str, list[int]]) -> dict:
    import math

    from hub_server import BITS

    out, offset = {}, 0
    for name, dtype, shape in tensors:
        n = math.prod(shape) * BITS.get(dtype, 8) // 8
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    return out


def test_gptq_compressed_tensors_and_bitsandbytes_parameter_counts():
    gptq = {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
    w = combine({"a": summarize_header(_header(
        ("l.qweight", "I32", [512, 4096]), ("l.qzeros", "I32", [32, 512]), ("l.scales", "F16", [32, 4096]),
        ("l.g_idx", "I32", [4096]), ("l.bias", "F16", [4096])), quant_scheme(gptq), "gptq")}, quant_scheme(gptq))
    assert w.params == 4096 * 4096 + 4096
    assert w.bytes == 512 * 4096 * 4 + 32 * 512 * 4 + 32 * 4096 * 2 + 4096 * 4 + 4096 * 2
    ct = {"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                  "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int"}}}}}
    w = combine({"a": summarize_header(_header(
        ("l.weight_packed", "I32", [4096, 512]), ("l.weight_scale", "BF16", [4096, 32]),
        ("l.weight_shape", "I32", [2])), quant_scheme(ct), "ct")}, quant_scheme(ct))
    assert w.params == 4096 * 4096 and quant_scheme(ct).name == "int4"
    nvfp4 = {"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
                                     "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float"}}}}}
    w = combine({"a": summarize_header(_header(
        ("l.weight_packed", "U8", [4096, 2048]), ("l.weight_scale", "F8_E4M3", [4096, 256]),
        ("l.weight_global_scale", "F32", [1])), quant_scheme(nvfp4), "nvfp4")}, quant_scheme(nvfp4))
    assert w.params == 4096 * 4096 and quant_scheme(nvfp4).name == "nvfp4"
    bnb = {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}}
    w = combine({"a": summarize_header(_header(
        ("l.weight", "U8", [8388608, 1]), ("l.weight.absmax", "F32", [262144]), ("l.weight.quant_map", "F32", [16]),
        ("l.weight.quant_state.bitsandbytes__nf4", "U8", [120]), ("norm.weight", "BF16", [4096])),
        quant_scheme(bnb), "bnb")}, quant_scheme(bnb))
    assert w.params == 4096 * 4096 + 4096 and quant_scheme(bnb).name == "nf4"


def test_headers_that_lie_are_refused():
    bad = _header(("w", "BF16", [4, 4]))
    bad["w"]["data_offsets"] = [0, 16]  # 16 values of bf16 need 32 bytes
    with pytest.raises(ConfigError, match="data_offsets span 16 bytes"):
        summarize_header(bad, quant_scheme({}), "x.safetensors")


def test_which_files_hold_the_weights():
    files = ["config.json", "model.safetensors.index.json", "original/consolidated.safetensors",
             *(f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3))]
    assert pick_safetensors(files) == ([f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)], None)
    assert pick_safetensors(["model-00001-of-00003.safetensors"])[0] == []
    assert pick_safetensors(["consolidated.safetensors", "params.json"]) == (["consolidated.safetensors"], None)
    assert pick_safetensors(["pytorch_model.bin"])[0] == []
    assert split_revision("org/name@v1.0") == ("org/name", "v1.0")


def test_mistral_params_refuses_what_it_cannot_read():
    notes: list[str] = []
    moe = config_from_mistral_params({"dim": 4096, "n_layers": 56, "n_heads": 48, "n_kv_heads": 8, "head_dim": 128,
                                      "hidden_dim": 16384, "vocab_size": 32768,
                                      "moe": {"num_experts": 8, "num_experts_per_tok": 2}}, "p", notes)
    assert moe["model_type"] == "mixtral" and moe["num_local_experts"] == 8
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        config_from_mistral_params({"dim": 1, "n_layers": 1, "n_heads": 1, "kv_lora_rank": 512}, "p", [])
