"""Ray clusters that run an engine: AIBrix ``RayClusterFleet`` (orchestration.aibrix.ai: ``spec.template.spec`` is
a KubeRay ``RayCluster`` spec, one cluster per fleet replica) and KubeRay's ``RayCluster`` itself.

The engine runs in the head pod (``vllm serve MODEL --tensor-parallel-size 2 --distributed-executor-backend
ray``) and spreads its ranks over the Ray cluster, so one engine's GPUs are the cluster's: the head container's
``nvidia.com/gpu`` plus, for each ``workerGroupSpecs[]`` entry, ``replicas`` x its container's (KubeRay starts
``replicas`` worker pods of a group; ``minReplicas`` / ``maxReplicas`` bound autoscaling, which kvplan does not
plan). The GPU type comes from the head pod's node selector or affinity.
"""

from __future__ import annotations

from typing import Any

from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.pods import MAX_PODS, annotations_of, apply_annotations, container_deployment, gpu_count, serving_containers, whole
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import LDict, dig, line_at


def read_ray(doc: LDict, docs: list[tuple[Any, int]], path: str, base_dir: str,
             findings: list[Finding]) -> list[Deployment]:
    kind = str(doc.get("kind"))
    name = str(dig(doc, "metadata", "name") or kind)
    where = "spec.template.spec" if kind == "RayClusterFleet" else "spec"
    cluster = dig(doc, "spec", "template", "spec") if kind == "RayClusterFleet" else doc.get("spec")
    if not isinstance(cluster, dict):
        findings.append(Finding("error", "invalid-input", f"{kind}: no RayCluster spec at {where}", path,
                                line_at(doc, "kind"), deployment=name, invalid_input=True))
        return []
    head = dig(cluster, "headGroupSpec", "template")
    head_pod = head.get("spec") if isinstance(head, dict) else None
    if not isinstance(head_pod, dict):
        findings.append(Finding("error", "invalid-input", f"{kind}: no pod at {where}.headGroupSpec.template.spec",
                                path, line_at(cluster), deployment=name, invalid_input=True))
        return []
    metas = [doc.get("metadata"), dig(doc, "spec", "template", "metadata"), head.get("metadata")]
    notes = annotations_of(metas)
    out = []
    serving = serving_containers(head_pod.get("containers"), name, path, findings)
    for c, inv in serving:
        dep_name = name if len(serving) == 1 else f"{name}/{c.get('name')}"
        dep = container_deployment(dep_name, c, inv, head_pod, path, base_dir)
        head_count, line = gpu_count(c)
        total, pods, parts = head_count or 0, 1, []
        if head_count:
            parts.append("head nvidia.com/gpu")
        for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
            if not isinstance(group, dict):
                continue
            raw = group.get("replicas", 1)
            replicas = whole(raw)
            if replicas is None or not 0 <= replicas <= MAX_PODS:
                findings.append(Finding("error", "invalid-input", f"{where}.workerGroupSpecs[{i}].replicas "
                                        f"{str(raw)[:40]!r}: not a whole number from 0 to {MAX_PODS:,}", path,
                                        line_at(group, "replicas"), deployment=dep_name, invalid_input=True))
                break
            containers = dig(group, "template", "spec", "containers")
            per_pod = sum((gpu_count(w)[0] or 0) for w in containers or [] if isinstance(w, dict)) \
                if isinstance(containers, list) else 0
            if replicas and per_pod:
                total += per_pod * replicas
                parts.append(f"{replicas} x {per_pod} in worker group {group.get('groupName', i)}")
            pods += replicas
        else:
            if total:
                dep.gpu_count = Value(total, line, "nvidia.com/gpu of the Ray cluster (" + " + ".join(parts) + ")")
            dep.pods = pods
            apply_annotations(dep, notes)
            out.append(dep)
    return out
