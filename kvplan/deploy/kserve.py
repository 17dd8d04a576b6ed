"""KServe: ``LLMInferenceService`` (serving.kserve.io, v1alpha1 / v1alpha2) and ``InferenceService`` whose
predictor runs vLLM.

An ``LLMInferenceService`` names no command: KServe merges it onto its well-known configs
(``config/llmisvcconfig/`` in kserve/kserve), whose ``main`` container runs
``vllm serve /mnt/models [--tensor-parallel-size T] ${VLLM_ADDITIONAL_ARGS} $@`` with the service's container
``args`` as ``$@`` (``config-llm-template.yaml``); with a ``worker`` and data parallelism
(``config-llm-worker-data-parallel.yaml``) also ``[--enable-expert-parallel] --data-parallel-size D
--data-parallel-size-local DL`` over ``D / DL`` pods (``ParallelismSpec.GetSize``), with a ``worker`` and
pipeline parallelism ``--pipeline-parallel-size P`` over ``P`` pods. The config is picked in
``pkg/controller/v1alpha2/llmisvc/config_merge.go`` (single node: no worker). ``spec.prefill`` is a separate set
of engines (prefill workers): its own deployment. A ``main`` container with its own ``command`` is read as
written.

An ``InferenceService`` runs its predictor's ``ServingRuntime`` / ``ClusterServingRuntime``: the runtime's
container (from the same file when it is there, else KServe's bundled ``kserve-vllmserver`` for
``modelFormat: vLLM`` and ``kserve-huggingfaceserver`` for ``huggingface``) with the predictor's ``args`` after
the runtime's. KServe's huggingface server runs vLLM with vLLM's engine flags unless ``--backend`` names another
backend (``python/huggingfaceserver/huggingfaceserver/__main__.py``).
"""

from __future__ import annotations

import shlex
from typing import Any

from kvplan.deploy.deployment import Deployment, Value
from kvplan.deploy.flags import FlagError, Token, find_invocation
from kvplan.deploy.pods import MAX_PODS, annotations_of, apply_annotations, container_deployment, gpu_count, image_version, serving_containers, whole
from kvplan.deploy.report import Finding
from kvplan.deploy.yaml_lines import LDict, dig, line_at
from kvplan.engines.serve import host_modules, hosted_by


def hf_model(uri: Any) -> str | None:
    """``hf://org/name`` (KServe's Hugging Face storage URI, an optional ``:revision`` after) -> ``org/name``."""
    if not isinstance(uri, str) or not uri.startswith("hf://"):
        return None
    parts = uri[len("hf://"):].split("/")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return None
    return f"{parts[0]}/{parts[1].split(':', 1)[0]}"


# ------------------------------------------------------------------------------------ LLMInferenceService

def read_llm_service(doc: LDict, docs: list[tuple[Any, int]], path: str, base_dir: str,
                     findings: list[Finding]) -> list[Deployment]:
    name = str(dig(doc, "metadata", "name") or "LLMInferenceService")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        findings.append(Finding("error", "invalid-input", "LLMInferenceService: no spec", path, line_at(doc, "kind"),
                                deployment=name, invalid_input=True))
        return []
    notes = annotations_of([doc.get("metadata")])
    out = []
    roles: list[tuple[str, LDict]] = [(name, spec)]
    if isinstance(spec.get("prefill"), dict):  # prefill workers: engines of their own
        roles.append((f"{name}/prefill", spec["prefill"]))
    for dep_name, role in roles:
        dep = _llm_role(dep_name, doc, spec, role, role is not spec, path, base_dir, findings)
        if dep is not None:
            apply_annotations(dep, notes)
            out.append(dep)
    return out


_PARALLELISM = {"tensor": "--tensor-parallel-size", "pipeline": "--pipeline-parallel-size",
                "data": "--data-parallel-size", "dataLocal": "--data-parallel-size-local"}


def _llm_role(dep_name: str, doc: LDict, spec: LDict, role: LDict, prefill: bool, path: str, base_dir: str,
              findings: list[Finding]) -> Deployment | None:
    where = "spec.prefill" if prefill else "spec"
    template = role.get("template") if isinstance(role.get("template"), dict) else (
        spec.get("template") if prefill and isinstance(spec.get("template"), dict) else {})
    containers = template.get("containers") if isinstance(template.get("containers"), list) else []
    main = next((c for c in containers if isinstance(c, dict) and c.get("name") == "main"), None)
    if main is None:
        main = next((c for c in containers if isinstance(c, dict)), {})
    worker = role.get("worker")
    parallelism = role.get("parallelism") if isinstance(role.get("parallelism"), dict) else {}
    numbers: dict[str, tuple[int, int | None]] = {}
    for key in _PARALLELISM:
        if key in parallelism and parallelism[key] is not None:
            value = whole(parallelism[key])
            if value is None or not 1 <= value <= MAX_PODS * 64:
                findings.append(Finding("error", "invalid-input", f"{where}.parallelism.{key} "
                                        f"{str(parallelism[key])[:40]!r}: not a whole number from 1 to "
                                        f"{MAX_PODS * 64:,}", path, line_at(parallelism, key), deployment=dep_name,
                                        invalid_input=True))
                return None
            numbers[key] = (value, line_at(parallelism, key))
    expert = parallelism.get("expert") is True
    model = hf_model(dig(spec, "model", "uri"))
    model_line = line_at(spec, "model", "uri") if dig(spec, "model", "uri") is not None else line_at(spec, "model")
    dep_notes: list[str] = []

    if main.get("command") is not None:  # the service's own command: read as written
        serving = serving_containers([main], dep_name, path, findings)
        if not serving:
            return None
        _, inv = serving[0]
        synthetic: dict[tuple[str, int | None], str] = {}
    else:
        # KServe's well-known config (kserve/kserve config/llmisvcconfig): vllm serve /mnt/models ... $@
        tokens = [*map(Token, hosted_by(HOST).serve_words), Token(model or "/mnt/models", model_line)]
        synthetic = {}

        def flag(text: str, key: str | None = None) -> None:
            value, line = numbers[key] if key else (None, line_at(parallelism, "expert"))
            tokens.append(Token(text, line))
            if value is not None:
                tokens.append(Token(str(value), line))
            synthetic[(text, line)] = f"{where}.parallelism.{key or 'expert'}"

        multi_node = isinstance(worker, dict)
        data_parallel = "data" in numbers or "dataLocal" in numbers
        if multi_node and data_parallel:  # config-llm-worker-data-parallel.yaml
            if expert:
                flag("--enable-expert-parallel")
            if "tensor" in numbers:
                flag("--tensor-parallel-size", "tensor")
            numbers.setdefault("data", (1, None))
            numbers.setdefault("dataLocal", (1, None))
            flag("--data-parallel-size", "data")
            flag("--data-parallel-size-local", "dataLocal")
        elif multi_node and "pipeline" in numbers:  # the pipeline-parallel config
            if "tensor" in numbers:
                flag("--tensor-parallel-size", "tensor")
            flag("--pipeline-parallel-size", "pipeline")
        else:  # config-llm-template.yaml (single node): only the tensor parallelism reaches vLLM
            if "tensor" in numbers:
                flag("--tensor-parallel-size", "tensor")
            ignored = [k for k in ("data", "dataLocal", "pipeline") if k in numbers] + (["expert"] if expert else [])
            if ignored:
                dep_notes.append(f"{where}.parallelism.{', '.join(ignored)} without a worker: KServe's single-node "
                                 "config passes only --tensor-parallel-size to vLLM")
        env = _env(main)
        extra = env.get("VLLM_ADDITIONAL_ARGS")
        if extra:
            try:
                words = shlex.split(extra)
            except ValueError:
                words = extra.split()
            line = next((line_at(e, "value") for e in main.get("env") or []
                         if isinstance(e, dict) and e.get("name") == "VLLM_ADDITIONAL_ARGS"), None)
            tokens += [Token(w, line) for w in words]
        args = main.get("args")
        if isinstance(args, list):
            lines = list(getattr(args, "lines", [None] * len(args)))
            tokens += [Token(str(a), lines[i]) for i, a in enumerate(args)]
        try:
            inv = find_invocation(tokens, env, k8s=True)
        except FlagError as exc:
            findings.append(Finding("error", "invalid-input", f"{dep_name}: {exc}", path, exc.line,
                                    deployment=dep_name, invalid_input=True))
            return None
        if inv is None:
            return None
        for e in main.get("env") or []:  # the variables the engine reads, with their lines
            if isinstance(e, dict) and e.get("name") in inv.environment:
                inv.environment[e["name"]] = (inv.environment[e["name"]][0], line_at(e, "value"))
    dep = container_deployment(dep_name, main, inv, template, path, base_dir)
    dep.line = line_at(role, "template") or line_at(doc, "kind")
    for key, value in dep.settings.items():  # flags KServe writes from spec.parallelism: named as the file does
        spelled = synthetic.get((value.spelled, value.line))
        if spelled is not None:
            value.spelled = spelled
    if model is not None and dep.model is not None and dep.model.value == model:
        dep.model = Value(model, model_line, f"{'spec.model.uri'}", str(dig(spec, "model", "uri")))
    elif dep.model is not None and dep.model.value == "/mnt/models":
        dep.model = Value("/mnt/models", model_line, "spec.model.uri", "/mnt/models")
    offload = dig(spec, "workload", "kvCacheOffloading")
    if isinstance(offload, dict):  # KServe wires an offloading connector from it: a host tier kvplan does not plan
        tiers = ", ".join(f"{k} {offload[k]}" for k in ("cpu",) if offload.get(k) is not None)
        more = " and secondary disk tiers" if offload.get("secondary") else ""
        dep_notes.append(f"spec.workload.kvCacheOffloading ({tiers or 'tiers'}{more}): KServe's KV offload tiers are "
                         "not planned; the GPU pool is checked alone")
    if isinstance(dig(spec, "speculator"), dict) and not prefill:
        dep_notes.append("spec.speculator: the draft model KServe adds is not read (checked without speculation)")
    dep.notes += dep_notes
    count, count_line = gpu_count(main)
    if count is not None:
        size = 1
        if isinstance(worker, dict):  # ParallelismSpec.GetSize: D / DL pods for data parallelism, P for pipeline
            if "data" in numbers or "dataLocal" in numbers:
                size = max(numbers.get("data", (1, None))[0] // max(numbers.get("dataLocal", (1, None))[0], 1), 1)
            elif "pipeline" in numbers:
                size = numbers["pipeline"][0]
        spelled = "nvidia.com/gpu limit" if size == 1 else f"nvidia.com/gpu x {size} pods ({where}.parallelism)"
        dep.gpu_count = Value(count * size, count_line, spelled)
        dep.pods = size
    return dep


def _env(c: LDict) -> dict[str, str]:
    env = {}
    for e in c.get("env") or []:
        if isinstance(e, dict) and isinstance(e.get("name"), str) and "value" in e and e["value"] is not None:
            env[e["name"]] = str(e["value"])
    return env


# ------------------------------------------------------------------------------------ InferenceService

#: The engine KServe's llmisvc config and bundled runtimes start is named by its package (``ServeFlags.hosts``).
HOST = "kserve"


def _bundled() -> dict[str, list[str]]:
    """KServe's bundled runtimes for LLM model formats (config/runtimes/kserve-vllmserver.yaml,
    kserve-huggingfaceserver.yaml): their command and arguments before the predictor's. The engine's model
    format is named after the engine."""
    serve = hosted_by(HOST)
    return {serve.engine: ["python", "-m", serve.modules[0], "--port=8080", "--model=/mnt/models"],
            "huggingface": ["python", "-m", "huggingfaceserver"]}


def read_inference_service(doc: LDict, docs: list[tuple[Any, int]], path: str, base_dir: str,
                           findings: list[Finding]) -> list[Deployment]:
    name = str(dig(doc, "metadata", "name") or "InferenceService")
    predictor = dig(doc, "spec", "predictor")
    if not isinstance(predictor, dict):
        findings.append(Finding("error", "invalid-input", "InferenceService: no spec.predictor", path,
                                line_at(doc, "kind"), deployment=name, invalid_input=True))
        return []
    notes = annotations_of([doc.get("metadata"), predictor.get("metadata")])
    if isinstance(predictor.get("containers"), list):  # a custom predictor: a pod spec
        out = []
        serving = serving_containers(predictor["containers"], name, path, findings)
        for c, inv in serving:
            dep = container_deployment(name if len(serving) == 1 else f"{name}/{c.get('name')}", c, inv, predictor,
                                       path, base_dir)
            _count(dep, c)
            apply_annotations(dep, notes)
            out.append(dep)
        return out
    model = predictor.get("model") if isinstance(predictor.get("model"), dict) else predictor.get("huggingface")
    if not isinstance(model, dict):
        return []
    fmt = dig(model, "modelFormat", "name") if isinstance(predictor.get("model"), dict) else "huggingface"
    runtime_name = model.get("runtime")
    runtime = _runtime(docs, runtime_name) if isinstance(runtime_name, str) else None
    if isinstance(runtime_name, str) and runtime is None and str(fmt).lower() not in _bundled():
        findings.append(Finding("error", "invalid-input", f"runtime '{runtime_name[:40]}' is not in this file: "
                                "kvplan cannot tell what it runs (add the ServingRuntime to the file)", path,
                                line_at(model, "runtime"), deployment=name, invalid_input=True))
        return []
    storage = model.get("storageUri") if model.get("storageUri") is not None else predictor.get("storageUri")
    env = {**_env(runtime or {}), **_env(model)}
    if runtime is not None:
        tokens = _container_argv(runtime)
        image = runtime.get("image")
    elif str(fmt).lower() in _bundled():
        words = _bundled()[str(fmt).lower()]
        tokens = [Token(w, line_at(model, "modelFormat")) for w in words]
        image = model.get("image")
    else:
        return []  # sklearn, xgboost, ...: no LLM engine
    args = model.get("args")
    if isinstance(args, list):
        lines = list(getattr(args, "lines", [None] * len(args)))
        tokens += [Token(str(a), lines[i]) for i, a in enumerate(args)]
    texts = [t.text for t in tokens]
    if "huggingfaceserver" in texts or any(t.endswith("huggingfaceserver") for t in texts):
        backend = _flag_value(tokens, "--backend")
        if backend is not None and backend[0] not in (hosted_by(HOST).engine, "auto"):
            return []  # the Hugging Face transformers backend: not an engine kvplan plans
    from kvplan.deploy.flags import kubelet_expand

    tokens = [Token(kubelet_expand(t.text, env), t.line, t.shell) for t in tokens]
    try:
        inv = find_invocation(tokens, env, k8s=True, modules=host_modules(HOST))
    except FlagError as exc:
        findings.append(Finding("error", "invalid-input", f"{name}: {exc}", path, exc.line, deployment=name,
                                invalid_input=True))
        return []
    if inv is None:
        return []
    dep = container_deployment(name, model, inv, predictor, path, base_dir, version=False)
    if inv.launcher.endswith("huggingfaceserver"):
        dep.notes.append("KServe's huggingface runtime runs vLLM (--backend auto or vllm) where vLLM supports the "
                         "model: checked as vLLM")
    if runtime is None and isinstance(runtime_name, str):
        dep.notes.append(f"runtime {runtime_name[:40]} is not in this file: read as KServe's bundled {fmt} runtime")
    if image is not None and "huggingfaceserver" not in str(image):  # its tag is KServe's release, not vLLM's
        tag = image_version(image, inv.engine)
        dep.image = image if isinstance(image, str) else None
        if tag:
            dep.engine_version = Value(tag, line_at(runtime, "image") if runtime else line_at(model, "image"),
                                       "image tag")
    dep.line = line_at(doc["spec"], "predictor")
    model_id = _flag_value(tokens, "--model_id")
    hub = hf_model(storage)
    if model_id is not None:
        dep.model = Value(model_id[0], model_id[1], "--model_id")
    elif hub is not None:
        dep.model = Value(hub, line_at(model, "storageUri") or line_at(predictor, "storageUri"), "storageUri",
                          str(storage))
    elif storage is not None and dep.model is None:  # pvc://, s3://: the weights are in the pod, at /mnt/models
        dep.model = Value("/mnt/models", line_at(model, "storageUri") or line_at(predictor, "storageUri"),
                          "storageUri", str(storage))
    _count(dep, model if dig(model, "resources") is not None else (runtime or {}))
    apply_annotations(dep, notes)
    return [dep]


def _count(dep: Deployment, c: LDict) -> None:
    count, line = gpu_count(c)
    if count is not None:
        dep.gpu_count = Value(count, line, "nvidia.com/gpu limit")


def _flag_value(tokens: list[Token], flag: str) -> tuple[str, int | None] | None:
    """The last value of ``flag`` (``--flag value`` or ``--flag=value``) among the tokens."""
    found = None
    for i, t in enumerate(tokens):
        if t.text.startswith(flag + "="):
            found = (t.text[len(flag) + 1:], t.line)
        elif t.text == flag and i + 1 < len(tokens):
            found = (tokens[i + 1].text, tokens[i + 1].line)
    return found


def _runtime(docs: list[tuple[Any, int]], name: str) -> LDict | None:
    """The first container of the (Cluster)ServingRuntime named ``name`` in the file, if there is one."""
    for doc, _ in docs:
        if isinstance(doc, dict) and doc.get("kind") in ("ServingRuntime", "ClusterServingRuntime") \
                and dig(doc, "metadata", "name") == name:
            containers = dig(doc, "spec", "containers")
            if isinstance(containers, list):
                return next((c for c in containers if isinstance(c, dict)), None)
    return None


def _container_argv(c: LDict) -> list[Token]:
    argv: list[Token] = []
    for key in ("command", "args"):
        items = c.get(key)
        if isinstance(items, list):
            lines = list(getattr(items, "lines", [None] * len(items)))
            argv += [Token(str(item), lines[i]) for i, item in enumerate(items)]
    return argv
