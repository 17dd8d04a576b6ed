"""Kubernetes manifests: Deployment, StatefulSet, Pod, Job, CronJob, ReplicaSet, DaemonSet and
LeaderWorkerSet (multi-document files and ``kind: List`` too) whose containers run an engine.

The GPU count is the container's ``nvidia.com/gpu`` limit (request when no limit; times the group size
for a LeaderWorkerSet); the GPU type comes from the pod's node selector or required node affinity on
``nvidia.com/gpu.product`` (or GKE / Karpenter labels), else a ``kvplan/gpu`` annotation, else ``--gpu``.
``$(VAR)`` in command and args is expanded from the container's literal ``env`` values, as the kubelet does.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any


from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.host_memory import k8s_limit
from kvplan.deploy.pods import (
    annotations_of,
    apply_annotations,
    container_deployment,
    gpu_count,
    serving_containers,
)
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
#: Platform kinds with a reader of their own (kvplan/deploy/kserve.py, dynamo.py, aibrix.py).
PLATFORM_KINDS = ("LLMInferenceService", "InferenceService", "DynamoGraphDeployment", "RayClusterFleet", "RayCluster")
#: Platform kinds that run nothing by themselves: a KServe runtime is read through the InferenceService naming it,
#: a KServe LLMInferenceServiceConfig is the platform's template (its image and flags are not the service's).
PLATFORM_OTHER_KINDS = {"ServingRuntime", "ClusterServingRuntime", "LLMInferenceServiceConfig", "PodAutoscaler",
                        "ModelAdapter", "KVCache"}


def _platform_reader(kind: Any) -> Any:
    """The reader of a platform kind, its module imported when a file holds one (most manifests hold none)."""
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


def read(docs: list[tuple[Any, int]], path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
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


def _lws(doc: LDict, path: str, base_dir: str, findings: list[Finding],
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


def _pod(doc: LDict, pod: LDict, metas: list[Any], path: str, base_dir: str, findings: list[Finding], *,
         group: int, worker: LDict | None = None, size_line: int | None = None,
         configmaps: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> list[Deployment]:
    name = str(dig(doc, "metadata", "name") or doc.get("kind"))
    notes = annotations_of(metas)
    out: list[Deployment] = []
    serving = serving_containers(pod.get("containers"), name, path, findings, env=env)
    for c, inv in serving:
        dep_name = name if len(serving) == 1 else f"{name}/{c.get('name')}"
        dep = container_deployment(dep_name, c, inv, pod, path, base_dir, configmaps=configmaps)
        count, count_line = gpu_count(c)
        if count is not None:
            total, spelled = count, "nvidia.com/gpu limit"
            if group > 1:
                worker_count = count
                if worker is not None:
                    wc = [gpu_count(w)[0] for w in worker.get("containers") or [] if isinstance(w, dict)]
                    worker_count = sum(x for x in wc if x) if any(wc) else count
                total = count + worker_count * (group - 1)
                spelled = f"nvidia.com/gpu x {group} pods (LeaderWorkerSet size)"
            dep.gpu_count = Value(total, count_line, spelled)
        dep.host_memory, dep.pods = k8s_limit(c), group  # pinned offload tiers vs the memory limit
        apply_annotations(dep, notes)
        out.append(dep)
    return out
