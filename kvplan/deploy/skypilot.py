"""SkyPilot task YAML (``sky launch`` / ``sky serve up``): the engine commands of its ``run:`` script.

``run`` is a bash script, read as ``kvplan.deploy.shell`` reads scripts, with the task's ``envs`` (and
``secrets``, whose values are not known here) and the variables SkyPilot sets on every node:
``SKYPILOT_NUM_GPUS_PER_NODE`` (the accelerator count), ``SKYPILOT_NUM_NODES`` (``num_nodes``) and
``SKYPILOT_NODE_RANK`` (the head node, 0, runs the server). ``resources.accelerators`` gives the GPU type and
count: ``H100:8``, ``A100`` (one), ``{H100: 8}``, or a set of alternatives (``{H100:8, H200:8}``, ``[L4, A10G]``;
``any_of`` / ``ordered`` lists): each type is checked, grouped by count. The GPU count is per node times
``num_nodes``. SkyPilot's names (``sky show-gpus``): ``A100`` is the 40 GB part and ``A100-80GB`` the 80 GB one,
``V100`` 16 GB and ``V100-32GB``.
"""

from __future__ import annotations

from typing import Any

from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.detect import SKYPILOT_TASK_KEYS
from kvplan.deploy.detect import skypilot as detect_skypilot
from kvplan.deploy.flags import FlagError, apply_invocation, script_invocations
from kvplan.deploy.helm import count, helm_text
from kvplan.deploy.pods import image_version
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import line_at
from kvplan.lazy_re import lazy_pattern
from kvplan.safe_io import path_stem

TASK_KEYS = SKYPILOT_TASK_KEYS
looks_like = detect_skypilot  # told apart from other values in detect.py, without this module
#: SkyPilot's accelerator names that are not a catalog name as they stand (docs: compute/gpus.html)
_NAMES = {"a100": "A100-SXM4-40GB", "a100-80gb": "A100-SXM4-80GB", "a100-80gb-sxm": "A100-SXM4-80GB",
          "v100": "V100-SXM2-16GB", "v100-32gb": "V100-SXM2-32GB", "h100-mega": "H100-SXM-80GB"}
_NAME = lazy_pattern(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")  # fullmatch on stripped text: no blank runs to retry


def read(data: Any, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
    findings: list[Finding] = []
    try:
        groups = _accelerators(data)
        nodes_line = line_at(data, "num_nodes")
        nodes = count(data["num_nodes"], "num_nodes", nodes_line, low=1) if data.get("num_nodes") is not None else 1
    except FlagError as exc:
        return [], [Finding("error", "invalid-input", str(exc), path, exc.line, invalid_input=True)], 0
    run = data.get("run")
    if not isinstance(run, str):
        return [], findings, 0
    env: dict[str, str] = {}
    envs = data.get("envs")
    if isinstance(envs, dict):
        for k, v in envs.items():
            if isinstance(k, str) and v is not None:  # null: given with --env at launch, unknown here
                env[k] = helm_text(v)
    stem = path_stem(path)
    deployments: list[Deployment] = []
    for per_node, labels in groups or [(None, [])]:
        task_env = dict(env)
        task_env.update({"SKYPILOT_NUM_NODES": str(nodes), "SKYPILOT_NODE_RANK": "0"})
        if per_node is not None:
            task_env["SKYPILOT_NUM_GPUS_PER_NODE"] = str(per_node)
        found = _run(run, line_at(data, "run"), task_env, path, base_dir, findings)
        for i, dep in enumerate(found):
            suffix = "" if len(found) == 1 else f"#{i + 1}"
            dep.name = stem + suffix + (f" [{per_node} GPUs]" if len(groups) > 1 else "")
            dep.gpus = list(labels)
            if per_node is not None:
                dep.gpu_count = Value(per_node * nodes, labels[0].line if labels else None,
                                      "resources.accelerators" + (f" x {nodes} nodes" if nodes > 1 else ""))
            dep.pods = nodes
            _image_version(dep, data)
            deployments.append(dep)
        if not found:
            break
    return deployments, findings, 1


def _image_version(dep: Deployment, data: Any) -> None:
    """``resources.image_id: docker:vllm/vllm-openai:v0.10.0`` (the task runs in that container: SkyPilot's
    docs, "Using Docker containers as runtime environments") gives the engine's version, as an image tag does
    in a manifest."""
    resources = data.get("resources")
    image = resources.get("image_id") if isinstance(resources, dict) else None
    if dep.engine_version is None and isinstance(image, str) and image.startswith("docker:"):
        dep.image = image[len("docker:"):]
        tag = image_version(dep.image, dep.engine)
        if tag:
            dep.engine_version = Value(tag, line_at(resources, "image_id"), "resources.image_id tag")


def _run(script: str, first_line: int | None, env: dict[str, str], path: str, base_dir: str,
         findings: list[Finding]) -> list[Deployment]:
    """The engine commands of the ``run`` script (its own assignments followed, as ``kvplan.deploy.shell``)."""
    out: list[Deployment] = []
    for _, inv in script_invocations(script, first_line, dict(env), path, findings):
        dep = Deployment(name="", file=path, line=inv.line, source="skypilot", base_dir=base_dir)
        apply_invocation(dep, inv)
        out.append(dep)
    return out


def _accelerators(data: Any) -> list[tuple[int, list[Value]]]:
    """(GPUs per node, GPU types) groups from ``resources.accelerators`` (and ``any_of`` / ``ordered``)."""
    resources = data.get("resources")
    if not isinstance(resources, dict):
        return []
    entries: list[tuple[Any, Any, int | None]] = []  # (name or "name:count", count or None, line)
    candidates = [resources] + [r for key in ("any_of", "ordered") for r in (resources.get(key) or [])
                                if isinstance(r, dict)]
    for res in candidates:
        accel = res.get("accelerators")
        line = line_at(res, "accelerators")
        if isinstance(accel, str):
            entries.append((accel, None, line))
        elif isinstance(accel, dict):
            lines = getattr(accel, "lines", {})
            entries += [(k, v, lines.get(k, line)) for k, v in accel.items()]
        elif isinstance(accel, list):
            lines = list(getattr(accel, "lines", [line] * len(accel)))
            entries += [(a, None, lines[i]) for i, a in enumerate(accel) if isinstance(a, str)]
    groups: dict[int, list[Value]] = {}
    for key, value, line in entries:
        name, colon, inline_text = str(key).partition(":")
        name, inline = name.strip(), (inline_text.strip() if colon else None)
        if not _NAME.fullmatch(name) or inline == "":
            raise FlagError(f"resources.accelerators {str(key)[:40]}: not NAME or NAME:COUNT", line)
        raw = value if value is not None else (inline if inline is not None else 1)
        n = count(raw, f"resources.accelerators {name}", line, low=1)  # 0.5 (a fraction of a GPU): refused
        label = _NAMES.get(name.lower(), name)
        groups.setdefault(n, []).append(Value(label, line, f"resources.accelerators {name}"))
    return sorted(groups.items())
