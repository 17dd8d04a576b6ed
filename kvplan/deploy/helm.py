"""Helm values read as the chart renders them: the vLLM production stack and vLLM's own chart.

**vLLM production stack** (vllm-project/production-stack, ``helm/templates/deployment-vllm-multi.yaml``):
one deployment per ``servingEngineSpec.modelSpec[]`` (``enabled: false`` skipped). The chart runs
``vllm serve <modelURL>`` with, from ``vllmConfig``: ``--enable-prefix-caching`` when ``enablePrefixCaching``
is true and ``--no-enable-prefix-caching`` otherwise (the template's ``else``), ``--max-model-len``,
``--dtype``, ``--tensor-parallel-size``, ``--max-num-seqs``, ``--gpu_memory_utilization``, then ``extraArgs``
(last: they win); ``--pipeline-parallel-size`` only on the Ray path (``raySpec.enabled``,
``templates/ray-cluster.yaml``). ``vllmConfig.v0: "1"`` sets ``VLLM_USE_V1=0`` (the V0 engine).
``lmcacheConfig.enabled`` adds ``--kv-transfer-config`` with ``LMCacheConnectorV1`` (``LMCacheConnector`` with
``v0``); ``cpuOffloadingBufferSize`` > 0 sets ``LMCACHE_LOCAL_CPU=True`` and ``LMCACHE_MAX_LOCAL_CPU_SIZE``
(GiB per worker), ``diskOffloadingBufferSize`` ``LMCACHE_MAX_LOCAL_DISK_SIZE``; ``modelSpec.env`` adds its
literal variables (``LMCACHE_LOCAL_DISK``). GPUs: ``resources`` (a raw override) or ``requestGPU``; memory
limit: ``limitMemory``; GPU type: ``affinity`` / ``nodeSelectorTerms``; ``annotations`` for ``kvplan/...`` keys;
``tag`` for the vLLM version (not for ``lmcache/vllm-openai``, whose tags are LMCache releases).
``vllmConfig`` keys the chart does not pass (``kvCacheDtype``, ``blockSize``, ``maxNumBatchedTokens``) are said,
not read.

**vLLM's chart** (vllm-project/vllm ``examples/online_serving/chart-helm``, ``templates/deployment.yaml``):
``image.command`` is the container's whole command (``vllm serve ...``), ``image.env`` its environment,
``resources.limits."nvidia.com/gpu"`` its GPUs, ``nodeSelector`` or ``gpuModels`` (node affinity on
``nvidia.com/gpu.product``, rendered when GPUs are requested and limited) the GPU type, ``image.tag`` the version.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.deploy.deployment import Deployment, Value, kvplan_annotations
from kvplan.deploy.flags import (
    FlagError,
    Token,
    apply_invocation,
    find_invocation,
    substitute,
)
from kvplan.deploy.pods import apply_annotations, labels_from_terms
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import dig, line_at
from kvplan.engines.serve import hosted_by
from kvplan.jsontext import dumps  # json.dumps, without importing json
from kvplan.safe_io import path_stem

STACK = "production-stack"  # vLLM's production-stack chart: its engine is named by the engine package

_NOT_PASSED = ("kvCacheDtype", "blockSize", "maxNumBatchedTokens")
_MAX_COUNT = 1 << 20  # GPUs per deployment: past any cluster; a bound keeps 10^4000 out of the arithmetic


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("servingEngineSpec"), dict)


def looks_like_vllm_chart(data: Any) -> bool:
    """vLLM's own chart: ``image.command`` (a list, required by its values.schema.json) beside ``resources``."""
    image = data.get("image") if isinstance(data, dict) else None
    return (isinstance(image, dict) and isinstance(image.get("command"), list) and "kind" not in data
            and "servingEngineSpec" not in data and ("gpuModels" in data or "resources" in data))


# ------------------------------------------------------------------------------------------- shared helpers

def helm_text(value: Any) -> str:
    """A value as Helm's ``quote`` / ``toYaml`` writes it into the container's argv: ``true`` for a boolean
    (which the engine then refuses where it wants a number), the number's own text otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def count(value: Any, spelled: str, line: int | None, *, low: int = 0) -> int:
    """A GPU / replica count as written: a whole number (``"2"`` too); FlagError naming the field otherwise
    (``true`` is not 1, ``1.5`` and ``1e308`` are not counts)."""
    if isinstance(value, (bool, float)):
        raise FlagError(f"{spelled} {helm_text(value)[:40]}: not a whole number", line)
    text = str(value).strip()
    if not text.isdigit() or len(text) > 12:
        raise FlagError(f"{spelled} {text[:40]}: not a whole number from {low} to {_MAX_COUNT:,}", line)
    number = int(text)
    if not low <= number <= _MAX_COUNT:
        raise FlagError(f"{spelled} {number}: not a whole number from {low} to {_MAX_COUNT:,}", line)
    return number


def literal_env(entries: Any) -> dict[str, tuple[str, int | None]]:
    """A Kubernetes ``env`` list's literal values (``valueFrom`` entries are not known here): name -> (value, line)."""
    out: dict[str, tuple[str, int | None]] = {}
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict) and isinstance(e.get("name"), str) and e.get("value") is not None:
            out[e["name"]] = (helm_text(e["value"]), line_at(e, "value"))
    return out


def run_command(dep: Deployment, argv: list[Token], env: dict[str, tuple[str, int | None]], *, k8s: bool = True,
                implicit: Any = None) -> bool:
    """Fill ``dep`` from the server's argv as its container runs it (``$(VAR)`` expanded from ``env`` as the kubelet
    does); False when argv starts no engine kvplan reads. FlagError where the engine would refuse a flag."""
    plain = {name: value for name, (value, _) in env.items()}
    if k8s:
        argv = [Token(substitute(t.text, plain, k8s=True)[0], t.line) for t in argv]
    inv = find_invocation(argv, plain, k8s=k8s, implicit=implicit)
    if inv is None:
        return False
    for name, (value, line) in env.items():  # the variables with their own lines
        if name in inv.environment:
            inv.environment[name] = (value, line)
    apply_invocation(dep, inv)
    return True


def tokens(items: Any, line: int | None) -> list[Token]:
    """A YAML list of arguments as tokens, each on its own line (a string: one argument)."""
    if isinstance(items, list):
        lines = list(getattr(items, "lines", [line] * len(items)))
        return [Token(helm_text(a), lines[i]) for i, a in enumerate(items) if a is not None]
    if items is None:
        return []
    return [Token(helm_text(items), line)]


# ------------------------------------------------------------------------------------------- production stack

def read(data: Any, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
    specs = dig(data, "servingEngineSpec", "modelSpec")
    deployments: list[Deployment] = []
    findings: list[Finding] = []
    if not isinstance(specs, list):
        return deployments, findings, 0
    cache_server = bool(dig(data, "cacheserverSpec", "enabled"))
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict) or spec.get("enabled") is False:
            continue
        name = str(spec.get("name") or f"modelSpec[{i}]")
        dep = Deployment(name=name, file=path, line=line_at(specs, i), source="helm", base_dir=base_dir)
        try:
            _stack_spec(dep, spec, cache_server)
        except FlagError as exc:
            findings.append(Finding("error", "invalid-input", str(exc), path, exc.line, deployment=name,
                                    invalid_input=True))
            continue
        deployments.append(dep)
    return deployments, findings, len(specs)


def _stack_spec(dep: Deployment, spec: Any, cache_server: bool) -> None:
    config = spec.get("vllmConfig") if isinstance(spec.get("vllmConfig"), dict) else {}
    lmcache = spec.get("lmcacheConfig") if isinstance(spec.get("lmcacheConfig"), dict) else {}
    ray = bool(dig(spec, "raySpec", "enabled"))
    v0 = config.get("v0") is not None and helm_text(config.get("v0")) == "1"  # (eq (toString .v0) "1")
    at = dep.line
    argv = [Token(word, at) for word in hosted_by(STACK).serve_words]
    if spec.get("modelURL") is not None:
        argv.append(Token(helm_text(spec["modelURL"]), line_at(spec, "modelURL")))
    if config:  # {{- with $modelSpec.vllmConfig }}: nothing of this without a vllmConfig
        if config.get("enablePrefixCaching"):
            argv.append(Token("--enable-prefix-caching", line_at(config, "enablePrefixCaching")))
        elif not ray:  # deployment-vllm-multi.yaml's else; ray-cluster.yaml has none
            argv.append(Token("--no-enable-prefix-caching", line_at(config, "enablePrefixCaching") or
                              line_at(spec, "vllmConfig")))
        flags = [("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
                 ("tensorParallelSize", "--tensor-parallel-size"), ("maxNumSeqs", "--max-num-seqs"),
                 ("gpuMemoryUtilization", "--gpu-memory-utilization")]
        if ray:
            flags.insert(3, ("pipelineParallelSize", "--pipeline-parallel-size"))
        for key, flag in flags:
            if key in config and config[key] is not None:
                line = line_at(config, key)
                argv += [Token(flag, line), Token(helm_text(config[key]), line)]
        argv += tokens(config.get("extraArgs"), line_at(config, "extraArgs"))
        for key in [*_NOT_PASSED, *([] if ray else ["pipelineParallelSize"])]:
            if key in config:
                dep.notes.append(f"vllmConfig.{key}: the production-stack chart does not pass it to vLLM "
                                 "(helm/templates/deployment-vllm-multi.yaml); give it in vllmConfig.extraArgs")
    env = literal_env(spec.get("env"))
    if v0:
        env["VLLM_USE_V1"] = ("0", line_at(config, "v0"))
    if lmcache.get("enabled"):
        connector = "LMCacheConnector" if v0 else "LMCacheConnectorV1"
        role = lmcache.get("kvRole") or "kv_both"
        argv += [Token("--kv-transfer-config", line_at(lmcache, "enabled")),
                 Token(dumps({"kv_connector": connector, "kv_role": helm_text(role)}), line_at(lmcache, "enabled"))]
    if lmcache:
        _lmcache_env(lmcache, env, cache_server)
    if not run_command(dep, argv, env):  # vllm serve: always an invocation
        return
    if spec.get("modelURL") is None:
        dep.model = None
    dep.engine_version = _stack_version(spec)
    if dep.engine_version is not None:  # the image the stack runs: its repository, else the engine's own
        dep.image = f"{spec.get('repository') or hosted_by(STACK).default_image}:{spec['tag']}"
    _stack_gpus(dep, spec)
    labels = labels_from_terms(dig(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                                   "nodeSelectorTerms")) or labels_from_terms(spec.get("nodeSelectorTerms"))
    dep.gpus = [Value(v, line, key) for v, line, key in labels]
    apply_annotations(dep, kvplan_annotations(spec.get("annotations")))


def _lmcache_env(lmcache: Any, env: dict[str, tuple[str, int | None]], cache_server: bool) -> None:
    """The ``LMCACHE_*`` variables deployment-vllm-multi.yaml sets from ``lmcacheConfig`` (whether or not
    ``enabled``: the template sets them outside that test; vLLM loads LMCache only with the connector)."""
    if lmcache.get("enablePD"):
        env["LMCACHE_LOCAL_CPU"] = ("False", line_at(lmcache, "enablePD"))
        env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = ("0", line_at(lmcache, "enablePD"))
    cpu = lmcache.get("cpuOffloadingBufferSize")
    if cpu is not None:
        line = line_at(lmcache, "cpuOffloadingBufferSize")
        if _helm_int(cpu) > 0:  # {{ if gt (int .cpuOffloadingBufferSize) 0 }}
            env["LMCACHE_LOCAL_CPU"] = ("True", line)
            env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = (helm_text(cpu), line)
    if lmcache.get("diskOffloadingBufferSize") is not None:
        env["LMCACHE_MAX_LOCAL_DISK_SIZE"] = (helm_text(lmcache["diskOffloadingBufferSize"]),
                                              line_at(lmcache, "diskOffloadingBufferSize"))
    if cache_server:
        env.setdefault("LMCACHE_REMOTE_URL", ("the chart's cache server (cacheserverSpec)", None))


def _helm_int(value: Any) -> int:
    """Sprig's ``int``: a number truncated, a string parsed as an integer, anything else 0."""
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, (int, float)):
        return int(value) if abs(value) < 1e18 else 0
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def _stack_version(spec: Any) -> Value | None:
    tag = spec.get("tag")
    repository = str(spec.get("repository") or "")
    if not isinstance(tag, str) or repository.startswith("lmcache/"):  # lmcache/vllm-openai: LMCache's release
        return None
    from kvplan.deploy.pods import image_version

    serve = hosted_by(STACK)
    version = image_version(f"{repository or serve.default_image}:{tag}", serve.engine)
    return Value(version, line_at(spec, "tag"), "tag") if version else None


def _stack_gpus(dep: Deployment, spec: Any) -> None:
    from kvplan.deploy.host_memory import k8s_limit, k8s_quantity

    resources = spec.get("resources")
    if isinstance(resources, dict) and resources:  # "takes priority over simplified resource fields"
        for section in ("limits", "requests"):
            value = dig(resources, section, "nvidia.com/gpu")
            if value is not None:
                line = line_at(spec, "resources", section, "nvidia.com/gpu")
                dep.gpu_count = Value(count(value, f"resources.{section}.nvidia.com/gpu", line), line,
                                      f"resources.{section}.nvidia.com/gpu")
                break
        dep.host_memory = k8s_limit(spec)
        return
    if spec.get("requestGPU") is not None:
        line = line_at(spec, "requestGPU")
        gpu_type = spec.get("requestGPUType")
        if gpu_type is not None and str(gpu_type) != "nvidia.com/gpu":
            dep.notes.append(f"requestGPUType {str(gpu_type)[:40]}: kvplan plans whole GPUs; give the slice's memory "
                             "in a kvplan deployment file")
        dep.gpu_count = Value(count(spec["requestGPU"], "requestGPU", line), line, "requestGPU")
    if spec.get("limitMemory") is not None:
        nbytes = k8s_quantity(spec["limitMemory"])
        if nbytes is not None:
            dep.host_memory = Value(nbytes, line_at(spec, "limitMemory"), "limitMemory", str(spec["limitMemory"]))


# ------------------------------------------------------------------------------------------- vLLM's chart

#: gpuModels' value in the chart's own values.yaml: a placeholder, not a GPU
_PLACEHOLDERS = {"TYPE_GPU_USED"}


def read_vllm_chart(data: Any, path: str, base_dir: str) -> tuple[list[Deployment], list[Finding], int]:
    from kvplan.deploy.flags import image_server
    from kvplan.deploy.gpus import GPU_LABEL_KEYS
    from kvplan.deploy.host_memory import k8s_limit
    from kvplan.deploy.pods import image_version

    image = data["image"]
    name = path_stem(path)
    dep = Deployment(name=name, file=path, line=line_at(data, "image"), source="helm", base_dir=base_dir)
    repo_tag = f"{image.get('repository') or ''}:{image.get('tag') or ''}"
    argv = tokens(image.get("command"), line_at(image, "command"))
    try:
        found = run_command(dep, argv, literal_env(image.get("env")), implicit=image_server(repo_tag))
        if found:
            _chart_gpus(dep, data)
    except FlagError as exc:
        return [], [Finding("error", "invalid-input", str(exc), path, exc.line, deployment=name,
                            invalid_input=True)], 1
    if not found:
        return [], [], 1
    version = image_version(repo_tag, dep.engine)
    dep.image = repo_tag
    if version:
        dep.engine_version = Value(version, line_at(image, "tag"), "image.tag")
    dep.host_memory = k8s_limit(data)
    selector = data.get("nodeSelector")
    for key in GPU_LABEL_KEYS if isinstance(selector, dict) else ():
        if selector.get(key) is not None:
            dep.gpus = [Value(str(selector[key]), line_at(data, "nodeSelector", key), f"nodeSelector {key}")]
            break
    models = data.get("gpuModels")
    if not dep.gpus and isinstance(models, list) and dep.gpu_count is not None and dep.gpu_count.value > 0:
        lines = list(getattr(models, "lines", [None] * len(models)))
        for i, label in enumerate(models):
            if str(label) in _PLACEHOLDERS:
                dep.notes.append(f"gpuModels {label}: the chart's placeholder, not a GPU product (the pod would "
                                 "schedule nowhere); checked on --gpu")
            elif label is not None:
                dep.gpus.append(Value(str(label), lines[i], "gpuModels (node affinity nvidia.com/gpu.product)"))
    return [dep], [], 1


def _chart_gpus(dep: Deployment, data: Any) -> None:
    for section in ("limits", "requests"):
        value = dig(data, "resources", section, "nvidia.com/gpu")
        if value is not None:
            line = line_at(data, "resources", section, "nvidia.com/gpu")
            dep.gpu_count = Value(count(value, f"resources.{section}.nvidia.com/gpu", line), line,
                                  f"resources.{section}.nvidia.com/gpu")
            return
