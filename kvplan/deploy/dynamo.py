"""NVIDIA Dynamo graph deployments (``DynamoGraphDeployment``, nvidia.com/v1alpha1 and v1beta1).

v1alpha1: ``spec.services`` maps a name to a service: ``componentType`` (frontend, worker, planner),
``subComponentType`` (prefill, decode), ``replicas``, ``resources.limits.gpu`` (GPUs of one replica's pod),
``multinode.nodeCount`` (pods of one replica), ``envs``, and ``extraPodSpec`` (a pod spec whose
``mainContainer`` runs the worker). v1beta1: ``spec.components[]`` with ``type``, ``replicas`` and a
``podTemplate.spec`` whose ``main`` container runs it (GPUs: its ``nvidia.com/gpu`` limit).

A worker runs ``python3 -m dynamo.vllm`` (vLLM's engine flags: ``AsyncEngineArgs``) or ``python3 -m
dynamo.sglang`` (SGLang's server flags), directly or in ``sh -c``: read with that engine's flags. Prefill and
decode workers are separate engines, each its own deployment. ``dynamo.trtllm`` takes Dynamo's own flags, which
kvplan does not read: reported, never skipped. The image tag (``vllm-runtime:0.4.1``) is Dynamo's release, not
the engine's: no engine version is read from it.
"""

from __future__ import annotations

from typing import Any

from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.pods import MAX_PODS, annotations_of, apply_annotations, container_deployment, gpu_count, serving_containers, whole
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import LDict, dig, line_at
from kvplan.engines.serve import host_modules, unread_host_modules

#: Dynamo's engine workers are named by the engine packages (``ServeFlags.host_modules``: the workers that take the
#: engine's own flags; ``unread_host_modules``: those whose flags are Dynamo's own, reported as not read).
HOST = "dynamo"


def read_graph(doc: LDict, docs: list[tuple[Any, int]], path: str, base_dir: str,
               findings: list[Finding]) -> list[Deployment]:
    name = str(dig(doc, "metadata", "name") or "DynamoGraphDeployment")
    spec = doc.get("spec")
    notes = annotations_of([doc.get("metadata")])
    services: list[tuple[str, LDict, LDict, LDict, int | None]] = []  # (name, service, pod, container, line)
    service_env: dict[str, dict[str, str]] = {}  # v1alpha1 ``envs``: set in the pod, under the container's env
    if isinstance(spec, dict) and isinstance(spec.get("services"), dict):
        for key, service in spec["services"].items():
            if not isinstance(service, dict):
                continue
            pod = service.get("extraPodSpec") if isinstance(service.get("extraPodSpec"), dict) else {}
            main = pod.get("mainContainer") if isinstance(pod.get("mainContainer"), dict) else {}
            service_env[str(key)] = {e["name"]: str(e["value"]) for e in _env_list(service.get("envs"))
                                     if isinstance(e.get("name"), str) and e.get("value") is not None}
            services.append((str(key), service, pod, main, line_at(spec["services"], key)))
    elif isinstance(spec, dict) and isinstance(spec.get("components"), list):
        for i, component in enumerate(spec["components"]):
            if not isinstance(component, dict):
                continue
            pod = dig(component, "podTemplate", "spec")
            pod = pod if isinstance(pod, dict) else {}
            containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
            main = next((c for c in containers if c.get("name") == "main"), containers[0] if containers else {})
            services.append((str(component.get("name") or f"components[{i}]"), component, pod, main,
                             line_at(spec["components"], i)))
    else:
        findings.append(Finding("error", "invalid-input", "DynamoGraphDeployment: no spec.services (v1alpha1) or "
                                "spec.components (v1beta1)", path, line_at(doc, "kind"), deployment=name,
                                invalid_input=True))
        return []
    out = []
    for key, service, pod, container, line in services:
        dep_name = f"{name}/{key}"
        if _runs_unread(container):
            findings.append(Finding("error", "invalid-input", f"{key}: runs {_runs_unread(container)}, whose flags "
                                    "are Dynamo's own: kvplan does not read them (check it with a kvplan deployment "
                                    "file)", path, line_at(container) or line, deployment=dep_name,
                                    invalid_input=True))
            continue
        serving = serving_containers([container], dep_name, path, findings, env=service_env.get(key),
                                     modules=host_modules(HOST))
        if not serving:
            continue
        c, inv = serving[0]
        dep = container_deployment(dep_name, c, inv, pod, path, base_dir, version=False)
        dep.line = line
        role = service.get("subComponentType")
        if isinstance(role, str) and role:
            dep.notes.append(f"subComponentType {role[:40]}: the {role[:40]} workers are checked as engines of "
                             "their own")
        if not _gpus(dep, service, c, path, findings):
            continue
        apply_annotations(dep, notes)
        out.append(dep)
    return out


def _env_list(envs: Any) -> list[Any]:
    return [e for e in envs if isinstance(e, dict)] if isinstance(envs, list) else []


def _runs_unread(container: LDict) -> str | None:
    words = []
    for key in ("command", "args"):
        items = container.get(key)
        if isinstance(items, list):
            words += [str(w) for w in items]
        elif isinstance(items, str):
            words.append(items)
    text = " ".join(words)[:1 << 20]
    return next((m for m in unread_host_modules(HOST) if f"-m {m}" in text or f"-m  {m}" in text), None)


def _gpus(dep: Deployment, service: LDict, c: LDict, path: str, findings: list[Finding]) -> bool:
    """One replica's GPUs: ``resources.limits.gpu`` (v1alpha1; requests when no limit) or the container's
    ``nvidia.com/gpu``, times ``multinode.nodeCount`` pods."""
    count: int | None = None
    line: int | None = None
    spelled = ""
    for section in ("limits", "requests"):
        raw = dig(service, "resources", section, "gpu")
        if raw is not None:
            count, line, spelled = whole(raw), line_at(service, "resources", section, "gpu"), f"resources.{section}.gpu"
            if count is None or not 0 <= count <= 1024:
                findings.append(Finding("error", "invalid-input", f"{spelled} {str(raw)[:40]!r}: not a whole number "
                                        "of GPUs", path, line, deployment=dep.name, invalid_input=True))
                return False
            break
    if count is None and not spelled:
        count, line = gpu_count(c)
        spelled = "nvidia.com/gpu limit"
    if count is None:
        return True
    nodes_raw = dig(service, "multinode", "nodeCount")
    nodes = whole(nodes_raw) if nodes_raw is not None else 1
    if nodes is None or not 1 <= nodes <= MAX_PODS:
        findings.append(Finding("error", "invalid-input", f"multinode.nodeCount {str(nodes_raw)[:40]!r}: not a whole "
                                f"number from 1 to {MAX_PODS:,}", path, line_at(service, "multinode", "nodeCount"),
                                deployment=dep.name, invalid_input=True))
        return False
    if nodes > 1:
        spelled = f"{spelled} x {nodes} nodes (multinode.nodeCount)"
    dep.gpu_count = Value(count * nodes, line, spelled)
    dep.pods = nodes
    return True
