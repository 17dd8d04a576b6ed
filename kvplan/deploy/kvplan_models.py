"""The pydantic models of kvplan's deployment file (``kvplan.deploy.kvplan_file`` describes the format).

Built only when a kvplan deployment file is validated or its schema printed: defining them costs ~30 ms
(pydantic builds a validator per model), which a command that reads no such file must not pay.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from kvplan.engines import DEFAULT_ENGINE, PACKAGE_ENGINES


def _not_bool(value: Any) -> Any:
    """Booleans are not numbers: pydantic's lax mode reads ``tp: true`` as 1 and ``gpu_memory_utilization: true``
    as 1.0; a deployment file that says ``true`` for a count or a size is refused, naming the field."""
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is a boolean, not a number")
    return value


NoBool = BeforeValidator(_not_bool)


def _count(value: Any) -> Any:
    _not_bool(value)
    if isinstance(value, str):
        from kvplan.units import parse_count

        return parse_count(value, "count")
    return value


def _fraction(value: Any) -> Any:
    _not_bool(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(f"'{value}' is not a fraction (0.1 or 10%)") from None
    return value


Count = Annotated[int, BeforeValidator(_count), Field(ge=1, description="A token count: 32768 or 32k (k = 1024).")]
# shared_prefix 0 means "nothing shared", as --shared-prefix 0 and the library's shared_prefix=0 read it
PrefixCount = Annotated[int, BeforeValidator(lambda v: 0 if isinstance(v, str) and v.strip() == "0" else _count(v)),
                        Field(ge=0, description="A token count: 32768 or 32k (k = 1024); 0 shares nothing.")]
Fraction = Annotated[float, BeforeValidator(_fraction), Field(ge=0, lt=1, description="0.1 or 10%.")]


_MAX_HOST_GIB = 1 << 20  # 1 PiB: beyond any host; an upper bound keeps inf and 1e300 out of int()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelRef(_Strict):
    """Exactly one of id, path, spec."""

    id: Optional[str] = Field(None, description="A bundled model id or a Hugging Face Hub id.")
    path: Optional[str] = Field(None, description="A YAML spec (`kvplan spec` output) or config.json, relative to this file.")
    spec: Optional[dict[str, Any]] = Field(None, description="An inline model spec (the `kvplan schema model` format).")

    @model_validator(mode="after")
    def _one(self) -> "ModelRef":
        if sum(x is not None for x in (self.id, self.path, self.spec)) != 1:
            raise ValueError("give exactly one of id, path, spec")
        return self


class GpuSpec(_Strict):
    type: Optional[str] = Field(None, description="A GPU from `kvplan gpus`, or a node label such as NVIDIA-H100-80GB-HBM3.")
    memory: Optional[str] = Field(None, description="Any other GPU: its total memory, e.g. 47.5GiB.")
    count: Annotated[int, NoBool] = Field(1, ge=1, description="GPUs the deployment gets (tp x pp x dp uses them).")
    devices: Optional[list[Union[Annotated[int, NoBool], str]]] = Field(
        None, min_length=1, description="The GPUs it runs on (indices or UUIDs, as CUDA_VISIBLE_DEVICES names them): "
        "deployments listing the same GPUs share them, started in the file's order.")

    @model_validator(mode="after")
    def _one(self) -> "GpuSpec":
        if (self.type is None) == (self.memory is None):
            raise ValueError("give exactly one of type, memory")
        return self


EngineName = Literal[PACKAGE_ENGINES]  # type: ignore[valid-type]  # the registry's engines, never listed by hand


class EngineSpec(_Strict):
    name: EngineName = DEFAULT_ENGINE
    version: Optional[str] = Field(None, description="Which release's accounting (default: the newest kvplan knows).")
    tp: Annotated[int, NoBool] = Field(1, ge=1)
    pp: Annotated[int, NoBool] = Field(1, ge=1)
    dp: Annotated[int, NoBool] = Field(1, ge=1)
    max_model_len: Optional[Count] = None
    max_num_seqs: Optional[Annotated[int, NoBool]] = Field(None, ge=1)
    gpu_memory_utilization: Optional[Annotated[float, NoBool]] = Field(None, gt=0, le=1)
    kv_cache_dtype: str = "auto"
    max_num_batched_tokens: Optional[Count] = None
    block_size: Optional[Annotated[int, NoBool]] = Field(None, ge=1)
    enforce_eager: bool = False
    mem_fraction_static: Optional[Annotated[float, NoBool]] = Field(None, gt=0, le=1)
    free_gpu_memory_fraction: Optional[Annotated[float, NoBool]] = Field(None, gt=0, le=1)
    kv_cache_memory: Optional[str] = Field(None, description="KV memory per GPU as the engine logged it, e.g. 30.5GiB.")
    weights_bytes: Optional[str] = Field(None, description="Weights per GPU, e.g. 14.99GiB.")
    # host-memory tiers and sharing, as the engine's own flags name them (refused for an engine without them)
    kv_offloading_size: Optional[Annotated[float, NoBool]] = Field(None, ge=0, le=_MAX_HOST_GIB, description="vLLM --kv-offloading-size: host KV tier, GiB for the whole deployment.")
    kv_offloading_backend: Optional[Literal["native", "lmcache"]] = Field(None, description="vLLM --kv-offloading-backend: native (OffloadingConnector) or lmcache (LMCache's local CPU tier).")
    swap_space: Optional[Annotated[float, NoBool]] = Field(None, ge=0, le=_MAX_HOST_GIB, description="vLLM V0 --swap-space: GiB per GPU.")
    cpu_offload_gb: Optional[Annotated[float, NoBool]] = Field(None, ge=0, le=_MAX_HOST_GIB, description="vLLM --cpu-offload-gb: GiB of weights per GPU kept in host memory.")
    enable_prefix_caching: Optional[bool] = Field(None, description="vLLM prefix caching (on by default in V1).")
    enable_hierarchical_cache: Optional[bool] = Field(None, description="SGLang --enable-hierarchical-cache.")
    hicache_ratio: Optional[Annotated[float, NoBool]] = Field(None, gt=0, le=10**4, description="SGLang --hicache-ratio (default 2.0).")
    hicache_size: Optional[Annotated[int, NoBool]] = Field(None, ge=0, le=10**6, description="SGLang --hicache-size: GB per rank (0: use the ratio).")
    disable_radix_cache: Optional[bool] = Field(None, description="SGLang --disable-radix-cache.")


class Requirements(_Strict):
    min_concurrency: Optional[Annotated[int, NoBool]] = Field(None, ge=1, description="Sequences of at_context tokens served at once.")
    at_context: Optional[Count] = Field(None, description="Context of min_concurrency (default: max_model_len).")
    min_context: Optional[Count] = Field(None, description="The longest request the deployment must take.")
    headroom: Optional[Fraction] = Field(None, description="Requirements must hold with this much less KV memory (0.1 or 10%).")
    max_num_seqs_reachable: bool = Field(False, description="max_num_seqs sequences of max_model_len must fit at once (an error, not a warning).")
    shared_prefix: Optional[PrefixCount] = Field(None, description="Leading tokens every request shares (a system prompt): min_concurrency is planned with the engine's prefix sharing; 0 shares nothing.")
    n: Optional[Annotated[int, NoBool]] = Field(None, ge=1, description="Sequences sampled per request (parallel sampling width); kvplan plans n = 1 and warns otherwise.")


class DeploymentSpec(_Strict):
    name: str = Field(..., min_length=1)
    model: Union[str, ModelRef]
    gpu: Union[str, GpuSpec]
    engine: Union[EngineName, EngineSpec] = DEFAULT_ENGINE
    requirements: Requirements = Field(default_factory=Requirements)


class DeploymentFile(_Strict):
    """kvplan deployment file (kvplan check)."""

    version: Literal[1] = 1
    deployments: list[DeploymentSpec] = Field(..., min_length=1)
