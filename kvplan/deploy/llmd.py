"""llm-d modelservice Helm values (llm-d-incubation/llm-d-modelservice, ``charts/llm-d-modelservice``), read as
the chart renders them (``templates/_helpers.tpl``).

One deployment per container of ``decode`` and of ``prefill`` (a section with ``create: false`` or
``replicas: 0`` runs no pod). ``parallelism`` (``tensor``, ``data``, ``dataLocal``, ``workers``) gives, as the
chart's ``tensorParallelism`` / ``dataParallelism`` / ``dataLocalParallelism`` / ``numWorkers`` helpers compute
them: TP = tensor or 1; DP = data, else dataLocal x workers, else dataLocal, else 1; DP local = dataLocal,
else data / workers, else data, else 1; workers = workers, else data / dataLocal, else 1.

- ``modelCommand: vllmServe`` (``vllmServeModelCommand``): ``vllm serve MODEL --port P`` then
  ``--tensor-parallel-size`` (TP > 1), ``--data-parallel-size`` (DP > 1), ``--data-parallel-size-local``
  (DP local > 1), ``--served-model-name``, then the container's ``args`` (they come last and win).
- ``imageDefault``: the same arguments with ``--model MODEL``, given to the image's own entry point (read when
  kvplan knows the image's server: ``vllm/vllm-openai``).
- ``custom`` (the default): the container's ``command`` and ``args`` as written.

The model comes from ``modelArtifacts.uri`` (``argsByProtocol``): ``hf://ID`` (``{{ .Values.modelArtifacts.name
}}`` rendered), ``pvc+hf://claim/.../NS/ID`` gives ``NS/ID``; ``pvc://`` is a path in the volume, checked as
``modelArtifacts.name`` (said in a note). GPUs per pod: the container's ``nvidia.com/gpu`` limit where given,
else DP local x TP (``numGpuPerWorker``), times ``workers`` pods with ``multinode: true`` (a LeaderWorkerSet).
GPU type: the section's ``nodeSelector`` or ``acceleratorTypes`` (``labelKey`` / ``labelValues``, rendered as
required node affinity). The chart sets ``DP_SIZE``, ``TP_SIZE``, ``DP_SIZE_LOCAL`` in the container's
environment (``parallelismEnv``): ``$(TP_SIZE)`` in a custom command reads them.
"""

from __future__ import annotations

from typing import Any

from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.detect import LLMD_ROLES
from kvplan.deploy.detect import llmd as detect_llmd
from kvplan.deploy.flags import FlagError, Token, image_server
from kvplan.deploy.helm import count, helm_text, literal_env, run_command, tokens
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import dig, line_at
from kvplan.engines.serve import hosted_by
from kvplan.lazy_re import lazy_pattern

ROLES = LLMD_ROLES
looks_like = detect_llmd  # told apart from other values in detect.py, without this module
_NAME_TEMPLATE = lazy_pattern(r"\{\{-?\s*\.Values\.modelArtifacts\.name\s*-?\}\}")


def read(data: Any, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
    deployments: list[Deployment] = []
    findings: list[Finding] = []
    sections = 0
    for role in ROLES:
        section = data.get(role)
        if not isinstance(section, dict) or section.get("create") is False:
            continue
        if section.get("replicas") is not None and helm_text(section["replicas"]) == "0":
            continue  # no pod (the chart's own default for prefill)
        sections += 1
        containers = section.get("containers")
        for i, c in enumerate(containers if isinstance(containers, list) else []):
            if not isinstance(c, dict):
                continue
            many = len(containers) > 1
            name = f"{role}/{c.get('name') or i}" if many else role
            dep = Deployment(name=name, file=path, line=line_at(containers, i), source="llm-d", base_dir=base_dir)
            try:
                read_ok, problem = _container(dep, data, role, section, c)
            except FlagError as exc:
                findings.append(Finding("error", "invalid-input", str(exc), path, exc.line, deployment=name,
                                        invalid_input=True))
                continue
            if problem:
                findings.append(Finding("error", "no-serving-container", problem, path, dep.line,
                                        deployment=name, invalid_input=True))
            if read_ok:
                deployments.append(dep)
    return deployments, findings, sections


def _parallelism(section: Any) -> tuple[int, int, int, int, dict[str, int | None]]:
    """(TP, DP, DP local, workers) as the chart's helpers compute them, and each field's line."""
    p = section.get("parallelism")
    p = p if isinstance(p, dict) else {}
    lines = {k: line_at(p, k) for k in ("tensor", "data", "dataLocal", "workers")}

    def get(key: str) -> int:  # sprig's truthiness: an absent or 0 field is "not set"
        value = p.get(key)
        return 0 if value is None else count(value, f"parallelism.{key}", lines[key])

    tensor, data, local, workers = get("tensor"), get("data"), get("dataLocal"), get("workers")
    tp = tensor or 1
    dp = data or (local * workers if local and workers else local) or 1
    if local:
        dp_local = local
    elif data and workers:
        if data % workers:
            raise FlagError("parallelism.data must be a multiple of parallelism.workers (the chart fails)",
                            lines["data"])
        dp_local = data // workers
    else:
        dp_local = data or 1
    if workers:
        n_workers = workers
    elif data and local:
        if data % local:
            raise FlagError("parallelism.data must be a multiple of parallelism.dataLocal (the chart fails)",
                            lines["data"])
        n_workers = data // local
    else:
        n_workers = 1
    return tp, dp, dp_local, n_workers, lines


def _model(data: Any) -> tuple[str | None, int | None, str | None]:
    """(model, line, note) from ``modelArtifacts`` as ``argsByProtocol`` renders it."""
    artifacts = data["modelArtifacts"]
    uri, name = artifacts.get("uri"), artifacts.get("name")
    line = line_at(artifacts, "uri") or line_at(artifacts, "name")
    if not isinstance(uri, str):
        return (str(name), line_at(artifacts, "name"), None) if name is not None else (None, line, None)
    protocol, _, other = uri.partition("://")
    if isinstance(name, str):
        other = _NAME_TEMPLATE.sub(name, other)
    other = other.strip().strip('"').strip("'")  # hf://"{{ ... }}" renders as a quoted YAML string
    if f"{protocol}://" == "hf://":  # the Hugging Face Hub's URI scheme
        return other, line, None
    if f"{protocol}://" == "pvc+hf://":
        parts = other.split("/")
        return ("/".join(parts[-2:]) if len(parts) >= 3 else other), line, None
    if name is not None:
        note = (f"modelArtifacts.uri {uri[:40]}: the weights are files in a volume; checked as modelArtifacts.name "
                f"{str(name)[:40]}")
        return str(name), line_at(artifacts, "name"), note
    return None, line, None


def _container(dep: Deployment, data: Any, role: str, section: Any, c: Any) -> tuple[bool, str | None]:
    """Fill ``dep`` from one container; (read, problem): a container that runs no engine kvplan reads says why."""
    from kvplan.deploy.gpus import GPU_LABEL_KEYS
    from kvplan.deploy.host_memory import k8s_limit

    tp, dp, dp_local, workers, plines = _parallelism(section)
    model, model_line, note = _model(data)
    mode = str(c.get("modelCommand") or "custom")
    env: dict[str, tuple[str, int | None]] = {
        "DP_SIZE": (str(dp), plines["data"]), "TP_SIZE": (str(tp), plines["tensor"]),
        "DP_SIZE_LOCAL": (str(dp_local), plines["dataLocal"])}
    env.update(literal_env(c.get("env")))
    at = line_at(c, "modelCommand") or dep.line
    args = tokens(c.get("args"), line_at(c, "args"))
    implicit = None
    if mode in ("vllmServe", "imageDefault"):
        chart = [Token("--port", at), Token("8000", at)]
        for flag, value, key in (("--tensor-parallel-size", tp, "tensor"), ("--data-parallel-size", dp, "data"),
                                 ("--data-parallel-size-local", dp_local, "dataLocal")):
            if value > 1:
                chart += [Token(flag, plines[key] or at), Token(str(value), plines[key] or at)]
        if mode == "vllmServe":
            argv = [Token(word, at) for word in hosted_by("llm-d").serve_words]
            argv += [Token(model, model_line)] if model else []
        else:
            implicit = image_server(c.get("image"))
            if implicit is None:
                return False, (f"modelCommand imageDefault runs image {str(c.get('image'))[:60]}'s own entry point, "
                               "which kvplan does not know: give modelCommand vllmServe or a custom command")
            argv = [Token("--model", model_line), Token(model, model_line)] if model else []
        argv += chart + args
    elif mode == "custom":
        argv = tokens(c.get("command"), line_at(c, "command")) + args
        implicit = image_server(c.get("image")) if c.get("command") is None else None
    else:
        raise FlagError(f"modelCommand {mode[:40]}: the chart takes vllmServe, imageDefault or custom", at)
    if not run_command(dep, argv, env, implicit=implicit):
        return False, "the container runs no engine kvplan reads (vllm serve MODEL, python -m sglang.launch_server ...)"
    if note and dep.model is not None and dep.model.value == model:
        dep.notes.append(note)
    from kvplan.deploy.pods import image_version

    version = image_version(c.get("image"), dep.engine)
    dep.image = c["image"] if isinstance(c.get("image"), str) else None
    if version:
        dep.engine_version = Value(version, line_at(c, "image"), "image tag")
    # GPUs: the container's own limit wins ("Respect user's explicit accelerator setting"), else DP local x TP
    accel = dig(section, "accelerator", "type") or dig(data, "accelerator", "type") or "nvidia"
    explicit = dig(c, "resources", "limits", "nvidia.com/gpu")
    multinode = bool(data.get("multinode"))
    pods = workers if multinode else 1
    if explicit is not None:
        line = line_at(c, "resources", "limits", "nvidia.com/gpu")
        per_pod = count(explicit, "resources.limits.nvidia.com/gpu", line)
        spelled = "resources.limits.nvidia.com/gpu"
    else:
        per_pod, line = dp_local * tp, plines["tensor"] or plines["dataLocal"] or dep.line
        spelled = "parallelism (dataLocal x tensor)"
    if str(accel) != "nvidia":
        dep.notes.append(f"accelerator.type {str(accel)[:40]}: kvplan's GPU catalog is NVIDIA's; give --gpu")
    dep.gpu_count = Value(per_pod * pods, line, spelled + (f" x {pods} workers (multinode)" if pods > 1 else ""))
    dep.pods = pods
    dep.host_memory = k8s_limit(c)
    selector = section.get("nodeSelector")
    for key in GPU_LABEL_KEYS if isinstance(selector, dict) else ():
        if selector.get(key) is not None:
            dep.gpus = [Value(str(selector[key]), line_at(section, "nodeSelector", key), f"{role}.nodeSelector {key}")]
            break
    types = section.get("acceleratorTypes")
    if not dep.gpus and isinstance(types, dict) and types.get("labelKey") in GPU_LABEL_KEYS:
        values = types.get("labelValues")
        lines = list(getattr(values, "lines", [None] * len(values))) if isinstance(values, list) else []
        dep.gpus = [Value(str(v), lines[i], f"{role}.acceleratorTypes {types['labelKey']}")
                    for i, v in enumerate(values if isinstance(values, list) else []) if v is not None]
    return True, None
