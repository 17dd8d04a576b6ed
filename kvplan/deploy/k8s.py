"""Kubernetes manifests: Deployment, StatefulSet, Pod, Job, CronJob, ReplicaSet, DaemonSet and
LeaderWorkerSet (multi-document files and ``kind: List`` too) whose containers run an engine.

The GPU count is the container's ``nvidia.com/gpu`` limit (request when no limit; times the group size
for a LeaderWorkerSet); the GPU type comes from the pod's node selector or required node affinity on
``nvidia.com/gpu.product`` (or GKE / Karpenter labels), else a ``kvplan/gpu`` annotation, else ``--gpu``.
``$(VAR)`` in command and args is expanded from the container's literal ``env`` values, as the kubelet does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kvplan.deploy.config_files import attach, k8s_configmaps
from kvplan.deploy.deployment import Deployment, Value, kvplan_annotations
from kvplan.deploy.flags import (
    FlagError,
    Token,
    apply_invocation,
    find_invocation,
    image_server,
    kubelet_expand,
)
from kvplan.deploy.gpus import GPU_LABEL_KEYS
from kvplan.deploy.host_memory import k8s_limit
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import LDict, dig, line_at

WORKLOADS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
#: Kinds that run no container: skipped without a word.
OTHER_KINDS = {
    "Service", "ConfigMap", "Secret", "Ingress", "IngressClass", "PersistentVolumeClaim", "PersistentVolume",
    "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Namespace",
    "HorizontalPodAutoscaler", "PodDisruptionBudget", "NetworkPolicy", "StorageClass", "PriorityClass",
    "LimitRange", "ResourceQuota", "Endpoints", "EndpointSlice", "ServiceMonitor", "PodMonitor",
    "PrometheusRule", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant", "ScaledObject", "VerticalPodAutoscaler",
    "CustomResourceDefinition", "InferencePool", "InferenceModel", "InferenceObjective", "RuntimeClass",
    "Certificate", "Issuer", "ClusterIssuer", "VirtualService", "DestinationRule",
}
_VERSION_TAG = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")
#: Platform kinds with a reader of their own (kvplan/deploy/kserve.py, dynamo.py, aibrix.py).
PLATFORM_KINDS = ("LLMInferenceService", "InferenceService", "DynamoGraphDeployment", "RayClusterFleet", "RayCluster")
#: Platform kinds that run nothing by themselves: a KServe runtime is read through the InferenceService naming it,
#: a KServe LLMInferenceServiceConfig is the platform's template (its image and flags are not the service's).
PLATFORM_OTHER_KINDS = {"ServingRuntime", "ClusterServingRuntime", "LLMInferenceServiceConfig", "PodAutoscaler",
                        "ModelAdapter", "KVCache"}


def _platform_reader(kind: Any) -> Any:
    if kind in ("LLMInferenceService", "InferenceService"):
        from kvplan.deploy import kserve

        return kserve.read_llm_service if kind == "LLMInferenceService" else kserve.read_inference_service
    if kind == "DynamoGraphDeployment":
        from kvplan.deploy import dynamo

        return dynamo.read_graph
    if kind in ("RayClusterFleet", "RayCluster"):
        from kvplan.deploy import aibrix

        return aibrix.read_ray
    return None


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and "kind" in data and ("apiVersion" in data or "metadata" in data)


def image_version(image: Any, engine: str) -> str | None:
    """``vllm/vllm-openai:v0.10.2`` -> 0.10.2 (engine images only; 'latest' and digests give None)."""
    from kvplan.engines.serve import serve_flags

    if not isinstance(image, str):
        return None
    serve = serve_flags(engine)
    tagged = serve is not None and any(re.search(p, image) for p in serve.tagged_images)
    if engine not in image.lower() and not tagged:
        return None
    m = _VERSION_TAG.search(image.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def read(docs: list[tuple[Any, int]], path: str, base_dir: Path) -> tuple[list[Deployment], list[Finding], int]:
    """Deployments of all documents; findings for documents kvplan cannot read; the number of workloads."""
    deployments: list[Deployment] = []
    findings: list[Finding] = []
    workloads = 0
    configmaps = _configmaps(docs)
    stack = [(doc, line) for doc, line in docs]
    while stack:
        doc, line = stack.pop(0)
        if doc is None:
            continue
        if not isinstance(doc, dict):
            findings.append(Finding("error", "invalid-input", "a Kubernetes document is a mapping (apiVersion, "
                                    "kind, ...)", path, line, invalid_input=True))
            continue
        kind = doc.get("kind")
        if kind == "List" and isinstance(doc.get("items"), list):
            items = doc["items"]
            stack[:0] = [(item, items.lines[i] if hasattr(items, "lines") else line) for i, item in enumerate(items)]
            continue
        if kind in OTHER_KINDS:
            continue
        if kind == "LeaderWorkerSet":
            workloads += 1
            deployments += _lws(doc, path, base_dir, findings, configmaps)
            continue
        reader = _platform_reader(kind)
        if reader is not None:  # KServe, NVIDIA Dynamo, KubeRay / AIBrix: their own readers
            workloads += 1
            deployments += reader(doc, docs, path, base_dir, findings)
            continue
        if kind in PLATFORM_OTHER_KINDS:
            continue
        if kind not in WORKLOADS:
            read_kinds = sorted([*WORKLOADS, "LeaderWorkerSet", *PLATFORM_KINDS])
            findings.append(Finding("error", "unknown-kind",
                                    f"unknown kind '{kind}': kvplan reads {', '.join(read_kinds)}",
                                    path, line_at(doc, "kind"), invalid_input=True))
            continue
        workloads += 1
        pod = dig(doc, *WORKLOADS[kind])
        if not isinstance(pod, dict):
            findings.append(Finding("error", "invalid-input", f"{kind}: no pod spec at {'.'.join(WORKLOADS[kind])}",
                                    path, line_at(doc, *WORKLOADS[kind]), invalid_input=True))
            continue
        template_meta = dig(doc, *WORKLOADS[kind][:-1], "metadata") if kind != "Pod" else None
        deployments += _pod(doc, pod, [doc.get("metadata"), template_meta], path, base_dir, findings, group=1,
                            configmaps=configmaps)
    return deployments, findings, workloads


def _configmaps(docs: list[tuple[Any, int]]) -> dict[str, Any]:
    """The ConfigMaps of the manifest (``kind: List`` items too) by name: their ``data``, for mounted files."""
    out: dict[str, Any] = {}
    stack = [doc for doc, _ in docs]
    while stack:
        doc = stack.pop()
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            stack.extend(doc["items"])
        elif isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and isinstance(doc.get("data"), dict):
            name = dig(doc, "metadata", "name")
            if isinstance(name, str):
                out[name] = doc["data"]
    return out


def _lws(doc: LDict, path: str, base_dir: Path, findings: list[Finding],
         configmaps: dict[str, Any] | None = None) -> list[Deployment]:
    template = dig(doc, "spec", "leaderWorkerTemplate")
    if not isinstance(template, dict):
        findings.append(Finding("error", "invalid-input", "LeaderWorkerSet: no spec.leaderWorkerTemplate", path,
                                line_at(doc, "spec"), invalid_input=True))
        return []
    size = template.get("size", 1)
    leader = dig(template, "leaderTemplate", "spec") or dig(template, "workerTemplate", "spec")
    worker = dig(template, "workerTemplate", "spec")
    if not isinstance(leader, dict):
        findings.append(Finding("error", "invalid-input", "LeaderWorkerSet: no leaderTemplate or workerTemplate "
                                "pod spec", path, line_at(template), invalid_input=True))
        return []
    metas = [doc.get("metadata"), dig(template, "leaderTemplate", "metadata"), dig(template, "workerTemplate", "metadata")]
    group = size if isinstance(size, int) and not isinstance(size, bool) and size >= 1 else 1
    # LeaderWorkerSet sets LWS_GROUP_SIZE in every pod of a group (its pod webhook): '$((LWS_GROUP_SIZE * 8))'
    env = {"LWS_GROUP_SIZE": str(group)} if group == size else {}
    deps = _pod(doc, leader, metas, path, base_dir, findings, group=group,
                worker=worker if isinstance(worker, dict) else None, size_line=line_at(template, "size"),
                configmaps=configmaps, env=env)
    return deps


def annotations_of(metas: list[Any]) -> dict[str, tuple[str, int | None, str]]:
    """The ``kvplan/...`` annotations of the given metadata mappings, later ones winning."""
    notes: dict[str, tuple[str, int | None, str]] = {}
    for meta in metas:
        if isinstance(meta, dict):
            notes.update(kvplan_annotations(meta.get("annotations")))
    return notes


def serving_containers(containers: Any, name: str, path: str, findings: list[Finding], *,
                       env: dict[str, str] | None = None,
                       modules: dict[str, str] | None = None) -> list[tuple[LDict, Any]]:
    """(container, invocation) of each container that runs an engine; a container whose flags the engine would
    refuse is that deployment's invalid finding."""
    serving = []
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        if not isinstance(c, dict):
            continue
        try:
            inv = _invocation(c, env, modules)
        except FlagError as exc:
            findings.append(Finding("error", "invalid-input", f"container {c.get('name', i)}: {exc}", path,
                                    exc.line, deployment=name, invalid_input=True))
            continue
        if inv is not None:
            serving.append((c, inv))
    return serving


def container_deployment(dep_name: str, c: LDict, inv: Any, pod: LDict, path: str, base_dir: Path, *,
                         source: str = "kubernetes", configmaps: dict[str, Any] | None = None,
                         version: bool = True) -> Deployment:
    """A deployment from a container running an engine: its flags, the image's version (``version``: the image
    is the engine's, not a platform's), the pod's GPU labels and memory limit. The GPU count is the caller's."""
    dep = Deployment(name=dep_name, file=path, line=line_at(c), source=source, base_dir=base_dir)
    apply_invocation(dep, inv)
    attach(dep, k8s_configmaps(c, pod, configmaps or {}, path))  # --extra_llm_api_options from a ConfigMap
    _unknown_env(dep, c, inv.engine)
    tag = image_version(c.get("image"), inv.engine) if version else None
    if tag:
        dep.engine_version = Value(tag, line_at(c, "image"), "image tag")
    dep.gpus = [Value(v, line, key) for v, line, key in _gpu_labels(pod)]
    dep.host_memory = k8s_limit(c)
    return dep


def _pod(doc: LDict, pod: LDict, metas: list[Any], path: str, base_dir: Path, findings: list[Finding], *,
         group: int, worker: LDict | None = None, size_line: int | None = None,
         configmaps: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> list[Deployment]:
    name = str(dig(doc, "metadata", "name") or doc.get("kind"))
    notes = annotations_of(metas)
    out: list[Deployment] = []
    serving = serving_containers(pod.get("containers"), name, path, findings, env=env)
    for c, inv in serving:
        dep_name = name if len(serving) == 1 else f"{name}/{c.get('name')}"
        dep = container_deployment(dep_name, c, inv, pod, path, base_dir, configmaps=configmaps)
        count, count_line = _gpu_count(c)
        if count is not None:
            total, spelled = count, "nvidia.com/gpu limit"
            if group > 1:
                worker_count = count
                if worker is not None:
                    wc = [_gpu_count(w)[0] for w in worker.get("containers") or [] if isinstance(w, dict)]
                    worker_count = sum(x for x in wc if x) if any(wc) else count
                total = count + worker_count * (group - 1)
                spelled = f"nvidia.com/gpu x {group} pods (LeaderWorkerSet size)"
            dep.gpu_count = Value(total, count_line, spelled)
        dep.host_memory, dep.pods = k8s_limit(c), group  # pinned offload tiers vs the memory limit
        _apply_annotations(dep, notes)
        out.append(dep)
    return out


def _unknown_env(dep: Deployment, c: LDict, engine: str) -> None:
    """Variables the engine reads (LMCACHE_*) whose value comes from elsewhere (valueFrom): unknown here."""
    from kvplan.deploy.deployment import Unknown
    from kvplan.engines.serve import serve_flags

    serve = serve_flags(engine)
    prefixes = serve.env_prefixes if serve is not None else ()
    for e in c.get("env") or []:
        name = e.get("name") if isinstance(e, dict) else None
        if prefixes and isinstance(name, str) and name.startswith(prefixes) and "value" not in e:
            dep.unknowns.append(Unknown(name, "valueFrom", line_at(e), (name,)))


def _apply_annotations(dep: Deployment, notes: dict[str, tuple[str, int | None, str]]) -> None:
    for key, (text, line, spelled) in notes.items():
        if key == "gpu" and not dep.gpus:
            dep.gpus = [Value(g.strip(), line, spelled) for g in text.split(",") if g.strip()]
        elif key == "model":
            model = text
            dep.model = Value(model, line, spelled)
        elif key == "engine_version":
            dep.engine_version = Value(text, line, spelled)
        elif key in ("min_concurrency", "at_context", "min_context", "headroom", "max_num_seqs_reachable"):
            dep.requirements[key] = Value(text, line, spelled, text)


def _invocation(c: LDict, extra_env: dict[str, str] | None = None, modules: dict[str, str] | None = None) -> Any:
    """The engine a container runs. ``extra_env``: variables the platform sets in the pod (LWS_GROUP_SIZE), which
    the container's own ``env`` overrides; ``modules``: the platform's ``python -m`` wrappers of an engine."""
    env = dict(extra_env or {})
    for e in c.get("env") or []:
        if isinstance(e, dict) and isinstance(e.get("name"), str) and "value" in e and e["value"] is not None:
            env[e["name"]] = str(e["value"])
    argv: list[Token] = []
    for key in ("command", "args"):
        items = c.get(key)
        if isinstance(items, str):  # not valid Kubernetes, but common in hand-written files
            items_list, lines = [items], [line_at(c, key)]
        elif isinstance(items, list):
            items_list, lines = items, list(getattr(items, "lines", [None] * len(items)))
        else:
            continue
        for item, line in zip(items_list, lines):
            argv.append(Token(str(item), line))
    implicit = image_server(c.get("image")) if c.get("command") is None else None
    # the kubelet expands $(VAR) from the container's env before anything runs
    expanded = [Token(kubelet_expand(t.text, env), t.line) for t in argv]
    inv = find_invocation(expanded, env, k8s=True, implicit=implicit, modules=modules)
    if inv is not None:  # the container's env entries, with their lines
        for e in c.get("env") or []:
            if isinstance(e, dict) and e.get("name") in env and e["name"] in inv.environment:
                inv.environment[e["name"]] = (env[e["name"]], line_at(e, "value"))
    return inv


def _gpu_count(c: Any) -> tuple[int | None, int | None]:
    for section in ("limits", "requests"):
        res = dig(c, "resources", section)
        if isinstance(res, dict) and "nvidia.com/gpu" in res:
            value = res["nvidia.com/gpu"]
            try:
                return int(str(value)), line_at(c, "resources", section, "nvidia.com/gpu")
            except ValueError:
                return None, line_at(c, "resources", section, "nvidia.com/gpu")
    return None, None


def _gpu_labels(pod: LDict) -> list[tuple[str, int | None, str]]:
    """GPU products the pod may be scheduled on: node selector first, then required node affinity."""
    selector = pod.get("nodeSelector")
    if isinstance(selector, dict):
        for key in GPU_LABEL_KEYS:
            if key in selector and selector[key] is not None:
                return [(str(selector[key]), line_at(pod, "nodeSelector", key), f"nodeSelector {key}")]
    terms = dig(pod, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    return labels_from_terms(terms)


def labels_from_terms(terms: Any) -> list[tuple[str, int | None, str]]:
    """GPU products named by ``In`` expressions of node selector terms."""
    found: list[tuple[str, int | None, str]] = []
    for term in terms if isinstance(terms, list) else []:
        for expr in (term.get("matchExpressions") or []) if isinstance(term, dict) else []:
            if isinstance(expr, dict) and expr.get("key") in GPU_LABEL_KEYS and expr.get("operator") == "In":
                values = expr.get("values") or []
                for i, v in enumerate(values):
                    line = values.lines[i] if hasattr(values, "lines") else None
                    found.append((str(v), line, f"node affinity {expr['key']}"))
    return list({v[0]: v for v in found}.values())
