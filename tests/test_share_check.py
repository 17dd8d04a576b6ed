"""``kvplan check`` on deployments pinned to the same GPUs (compose ``device_ids``, a kvplan file's
``gpu.devices``): each one's share, whether it starts in the file's order, and the fixes, planned again."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from kvplan.budgets.base import GIB
from kvplan.deploy import check

H100 = 85017755648
SNAPSHOT = int(0.51 * GIB)


def _service(name: str, model: str, util: float, devices: str = '["0"]') -> str:
    return f"""  {name}:
    image: vllm/vllm-openai:v0.11.0
    command: ["--model", "{model}", "--max-model-len", "32768", "--gpu-memory-utilization", "{util}"]
    labels: ["kvplan/gpu=H100"]
    deploy:
      resources:
        reservations:
          devices: [{{driver: nvidia, device_ids: {devices}, capabilities: [gpu]}}]
"""


def _findings(report, code: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for d in report.files[0].deployments:
        out[d.name] = [f for f in d.findings if f.code == code]
    return out


def test_two_halves_of_one_gpu_fail_with_planned_fixes(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n" + _service("chat", "Qwen/Qwen3-8B", 0.5) + _service("embed", "Qwen/Qwen3-8B", 0.5))
    report = check([path])
    assert report.exit_code == 1
    started = _findings(report, "shared-gpu")["chat"][0]
    assert f"takes {(SNAPSHOT + math.ceil(H100 * 0.5)) / GIB:.2f} GiB of {H100 / GIB:.2f} GiB" in started.message
    refused = _findings(report, "shared-gpu-start")["embed"][0]
    assert refused.severity == "error" and refused.line == 17  # the device_ids line
    assert "refuses to start" in refused.message and "38.57 GiB" in refused.message
    assert refused.suggestion == ("planned fixes: chat: --gpu-memory-utilization 0.48; embed: "
                                  "--gpu-memory-utilization 0.48")
    # the fix, written into the file and checked again, passes
    path.write_text("services:\n" + _service("chat", "Qwen/Qwen3-8B", 0.48) + _service("embed", "Qwen/Qwen3-8B", 0.5))
    again = check([path])
    assert again.exit_code == 0 and not any(_findings(again, "shared-gpu-start").values())


def test_other_devices_are_not_shared(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n" + _service("a", "Qwen/Qwen3-8B", 0.5) + _service("b", "Qwen/Qwen3-8B", 0.5, '["1"]'))
    report = check([path])
    assert report.exit_code == 0 and not any(_findings(report, "shared-gpu").values())


def test_a_start_order_that_matters_is_a_warning(tmp_path: Path) -> None:
    # SGLang takes 0.9 of the memory free at its start: started first, it leaves vLLM less than its 0.1
    path = tmp_path / "kvplan.yaml"
    path.write_text("""version: 1
deployments:
  - name: small
    model: Qwen/Qwen3-0.6B
    gpu: {type: H100, devices: [0]}
    engine: {name: vllm, gpu_memory_utilization: 0.1, max_model_len: 32k}
  - name: big
    model: Qwen/Qwen3-8B
    gpu: {type: H100, devices: [0]}
    engine: {name: sglang, mem_fraction_static: 0.9, max_model_len: 32k}
""")
    report = check([path])
    order = _findings(report, "shared-gpu-order")
    assert [f.severity for f in order["small"]] == ["warning"] and not order["big"]
    assert order["small"][0].suggestion == "start small then big"
    assert report.exit_code == 0


def test_json_carries_the_findings(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n" + _service("a", "Qwen/Qwen3-8B", 0.5) + _service("b", "Qwen/Qwen3-8B", 0.5))
    out = subprocess.run([sys.executable, "-m", "kvplan", "check", str(path), "-f", "json"], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 1
    data = json.loads(out.stdout)
    (b,) = [d for d in data["deployments"] if d["name"] == "b"]
    assert [f["code"] for f in b["findings"] if f["code"].startswith("shared")] == ["shared-gpu-start"]
