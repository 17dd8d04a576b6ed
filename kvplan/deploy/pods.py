"""What every Kubernetes-shaped reader shares (plain workloads, LeaderWorkerSet, KServe, NVIDIA Dynamo, KubeRay /
AIBrix, and the Helm, compose and shell readers' annotations): the containers that run an engine, their flags and
image version, the pod's GPU labels and counts, the ``kvplan/...`` annotations. Readers import this module and
none imports another reader: the imports run one way."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.deploy.config_files import attach, k8s_configmaps
from kvplan.deploy.deployment import Deployment, Value, kvplan_annotations
from kvplan.deploy.flags import FlagError, Token, apply_invocation, find_invocation, image_server, kubelet_expand
from kvplan.deploy.gpus import GPU_LABEL_KEYS
from kvplan.deploy.host_memory import k8s_limit
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import LDict, dig, line_at
from kvplan.engines.serve_format import image_search
from kvplan.lazy_re import lazy_pattern

MAX_PODS = 1 << 16  # pods of one engine: a cluster's nodes, far past any deployment (a count of 10^9 is a typo)
_VERSION_TAG = lazy_pattern(r":v?(\d+\.\d+(?:\.\d+)?)")


def whole(value: Any) -> int | None:
    """A count as a manifest gives it: an integer (or its text), never a boolean; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 9:
        return int(value)
    return None


def image_version(image: Any, engine: str) -> str | None:
    """``vllm/vllm-openai:v0.10.2`` -> 0.10.2 (engine images only; 'latest' and digests give None)."""
    from kvplan.engines.serve import serve_flags

    if not isinstance(image, str):
        return None
    serve = serve_flags(engine)
    if engine not in image.lower() and not (serve is not None and any(image_search(p, image) for p in serve.tagged_images)):
        return None
    return version_tag(image.rsplit("/", 1)[-1])


def version_tag(tag: str) -> str | None:
    """``_VERSION_TAG.search(tag).group(1)`` (None where it does not match), ASCII text read by hand: the leftmost
    ``:`` (then an optional ``v``) followed by digits, ``.``, digits and optionally ``.`` and digits, each run whole."""
    if not tag.isascii():
        m = _VERSION_TAG.search(tag)
        return m.group(1) if m else None
    at = tag.find(":")
    while at >= 0:
        start = at + 2 if tag[at + 1:at + 2] == "v" else at + 1
        end = _digits(tag, start)
        if end > start and tag[end:end + 1] == ".":
            after = _digits(tag, end + 1)
            if after > end + 1:
                more = _digits(tag, after + 1) if tag[after:after + 1] == "." else after
                return tag[start:more if more > after + 1 else after]
        at = tag.find(":", at + 1)
    return None


def _digits(text: str, start: int) -> int:
    """The end of the run of ASCII digits that starts at ``start``."""
    end = start
    while end < len(text) and text[end] in "0123456789":
        end += 1
    return end


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
            inv = invocation(c, env, modules)
        except FlagError as exc:
            findings.append(Finding("error", "invalid-input", f"container {c.get('name', i)}: {exc}", path,
                                    exc.line, deployment=name, invalid_input=True))
            continue
        if inv is not None:
            serving.append((c, inv))
    return serving


def container_deployment(dep_name: str, c: LDict, inv: Any, pod: LDict, path: str, base_dir: str, *,
                         source: str = "kubernetes", configmaps: dict[str, Any] | None = None,
                         version: bool = True) -> Deployment:
    """A deployment from a container running an engine: its flags, the image's version (``version``: the image
    is the engine's, not a platform's), the pod's GPU labels and memory limit. The GPU count is the caller's."""
    dep = Deployment(name=dep_name, file=path, line=line_at(c), source=source, base_dir=base_dir)
    apply_invocation(dep, inv)
    attach(dep, k8s_configmaps(c, pod, configmaps or {}, path))  # --extra_llm_api_options from a ConfigMap
    unknown_env(dep, c, inv.engine)
    tag = image_version(c.get("image"), inv.engine) if version else None
    if tag:
        dep.engine_version = Value(tag, line_at(c, "image"), "image tag")
    if version and isinstance(c.get("image"), str):
        dep.image = c["image"]
    dep.gpus = [Value(v, line, key) for v, line, key in gpu_labels(pod)]
    dep.host_memory = k8s_limit(c)
    return dep


def unknown_env(dep: Deployment, c: LDict, engine: str) -> None:
    """Variables the engine reads (LMCACHE_*) whose value comes from elsewhere (valueFrom): unknown here."""
    from kvplan.deploy.deployment import Unknown
    from kvplan.engines.serve import serve_flags

    serve = serve_flags(engine)
    prefixes = serve.env_prefixes if serve is not None else ()
    for e in c.get("env") or []:
        name = e.get("name") if isinstance(e, dict) else None
        if prefixes and isinstance(name, str) and name.startswith(prefixes) and "value" not in e:
            dep.unknowns.append(Unknown(name, "valueFrom", line_at(e), (name,)))


def apply_annotations(dep: Deployment, notes: dict[str, tuple[str, int | None, str]]) -> None:
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


def invocation(c: LDict, extra_env: dict[str, str] | None = None, modules: dict[str, str] | None = None) -> Any:
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


def gpu_count(c: Any) -> tuple[int | None, int | None]:
    for section in ("limits", "requests"):
        res = dig(c, "resources", section)
        if isinstance(res, dict) and "nvidia.com/gpu" in res:
            value = res["nvidia.com/gpu"]
            try:
                return int(str(value)), line_at(c, "resources", section, "nvidia.com/gpu")
            except ValueError:
                return None, line_at(c, "resources", section, "nvidia.com/gpu")
    return None, None


def gpu_labels(pod: LDict) -> list[tuple[str, int | None, str]]:
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
