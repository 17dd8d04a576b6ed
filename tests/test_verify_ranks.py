"""verify across ranks: each tp x pp rank allocates exactly its shard, under torch.distributed on the CPU.

The per-rank plans need no torch (kvplan.verify.ranks); the runs start real rank processes with
torch's own multiprocessing (--launch) or torchrun, gloo over loopback, small shapes (batch 1, a few
hundred tokens) and a process-group timeout, so every test is bounded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import KvplanError
from kvplan.sources.resolve import load_model
from kvplan.verify.errors import VerifyError
from kvplan.verify.ranks import placement, plan_ranks
from conftest import REPO, estimate_kv

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_NUMPY = importlib.util.find_spec("numpy") is not None
needs_dist = pytest.mark.skipif(not (HAS_TORCH and HAS_NUMPY),
                                reason="torch and numpy needed: pip install 'kvplan[verify]'")
TIMEOUT_S = 120  # the process group's timeout: a stuck rank fails the test instead of hanging it


# ------------------------------------------------------------------------------ plans (no torch)

@given(tp=st.integers(1, 8), pp=st.integers(1, 8))
def test_rank_r_is_tp_rank_r_mod_tp_of_stage_r_div_tp(tp, pp):
    seen = {placement(r, tp) for r in range(tp * pp)}
    assert seen == {(t, p) for t in range(tp) for p in range(pp)}
    assert all(placement(r, tp) == (r % tp, r // tp) for r in range(tp * pp))


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_tp_splits_kv_heads_and_replicates_past_them(tp):
    spec = load_model("meta-llama/Llama-3.1-8B")  # 8 KV heads
    plans = plan_ranks(spec, tp=tp, batch=2, context=1000)
    assert len(plans) == tp
    for rp in plans:
        assert rp.pp_rank == 0 and (rp.first_layer, rp.num_layers) == (0, 32)
        assert rp.plan.predicted_bytes == estimate_kv(spec, 2, 1000, tp=tp)
        k = next(v for v in rp.plan.buffers[0].views if v.role == "K")
        assert k.shape[2] == max(1, 8 // tp)  # [blocks, block, heads, dim]
    # tp 16 holds what tp 8 holds: heads are copied, not split further
    if tp == 16:
        assert plans[0].plan.predicted_bytes == estimate_kv(spec, 2, 1000, tp=8)


def test_mla_latent_is_replicated_on_every_tp_rank():
    spec = load_model("deepseek-ai/DeepSeek-V2-Lite")
    whole = estimate_kv(spec, 1, 300)
    for rp in plan_ranks(spec, tp=4, batch=1, context=300):
        assert rp.plan.predicted_bytes == whole


@pytest.mark.parametrize("engine", ["vllm", "hf"])
@pytest.mark.parametrize("pp", [2, 3, 4])
def test_pp_stages_cover_the_layers_and_add_up(engine, pp):
    # full attention only: a stage's cache is its layers' share, so the stages add up to the whole
    spec = load_model("Qwen/Qwen3-0.6B")
    plans = plan_ranks(spec, pp=pp, batch=3, context=500, engine=engine)
    layers = [i for rp in plans for i in range(rp.first_layer, rp.first_layer + rp.num_layers)]
    assert layers == list(range(spec.num_layers))
    assert sum(rp.plan.predicted_bytes for rp in plans) == estimate_kv(spec, 3, 500, engine=engine)
    assert all(rp.plan.buffer_bytes == rp.plan.predicted_bytes for rp in plans)


def test_vllm_stages_of_a_hybrid_model_carry_the_whole_models_groups():
    # gemma-3-27b: 52 sliding + 10 full layers in groups of 10 (6 sliding groups, 8 padding slots).
    # Two stages of 31 layers: each keeps the 7 groups, projected: 26 sliding + 5 full layers in
    # groups of 5 slots, so 6 x 5 - 26 = 4 sliding padding slots per stage
    spec = load_model("google/gemma-3-27b-it")
    plans = plan_ranks(spec, pp=2, batch=1, context=2048)
    for rp in plans:
        assert rp.plan.group_size == 5 and rp.plan.padding_layers == 4
        # 30 sliding slots x 1,040 tokens (65 blocks under async scheduling at 2k) + 5 full x 2,048, 8,192 B each
        assert rp.plan.buffer_bytes == rp.plan.predicted_bytes == (30 * 1040 + 5 * 2048) * 8192
    assert sum(rp.plan.predicted_bytes for rp in plans) == 678_952_960  # test_verify: the whole model


def test_refusals_name_the_value():
    spec = load_model("Qwen/Qwen3-0.6B")
    with pytest.raises(KvplanError, match="pipeline parallelism") as refused:
        plan_ranks(spec, tp=2, engine="hf")  # transformers places whole layers per GPU
    assert refused.value.field == "tp"
    with pytest.raises(KvplanError, match="refuses tensor parallelism 3") as refused:
        plan_ranks(spec, tp=3)
    assert refused.value.field == "tp"
    with pytest.raises(VerifyError, match="--tp 0"):
        plan_ranks(spec, tp=0)
    with pytest.raises(VerifyError, match="at most 64"):
        plan_ranks(spec, tp=16, pp=8)
    with pytest.raises(VerifyError, match="no tensor layout"):
        plan_ranks(spec, engine="llamacpp")


# ------------------------------------------------------------------------------ ranks (torch.distributed, CPU)

def _launch(model, tp, pp, **kw):
    from kvplan.verify.distributed import launch
    from kvplan.verify.allocate import live_tensors

    result = launch(model, nprocs=tp * pp, tp=tp, pp=pp, device="cpu", timeout_s=TIMEOUT_S, **kw)
    assert live_tensors() == 0  # the launcher allocates nothing itself
    assert [r.rank for r in result.ranks] == list(range(tp * pp))
    assert [(r.tp_rank, r.pp_rank) for r in result.ranks] == [placement(r, tp) for r in range(tp * pp)]
    assert result.exact and not result.errors and all(r.released for r in result.ranks)
    for r in result.ranks:
        assert r.measured_storage_bytes == r.predicted_bytes == r.allocated_bytes
        assert all(c.measured_bytes == c.predicted_bytes for c in r.components)
    return result


@pytest.mark.slow
@needs_dist
def test_two_tp_ranks_each_hold_half_the_heads():
    result = _launch("meta-llama/Llama-3.2-1B-Instruct", 2, 1, batch=1, context=256)
    half = estimate_kv("meta-llama/Llama-3.2-1B-Instruct", 1, 256, tp=2)
    assert half * 2 == estimate_kv("meta-llama/Llama-3.2-1B-Instruct", 1, 256)
    assert [r.predicted_bytes for r in result.ranks] == [half, half]
    assert result.backend == "gloo" and result.launcher == "launch"


@pytest.mark.slow
@needs_dist
def test_four_ranks_mla_tp2_pp2():
    spec = load_model("deepseek-ai/DeepSeek-V2-Lite")
    result = _launch(spec, 2, 2, batch=1, context=128)
    # 27 layers: stages of 14 and 13; each rank replicates the latent of its stage's layers
    # (64 tokens per block x 576 x 2 B = 73,728 B per layer and block; 128 tokens = 2 blocks)
    assert [(r.first_layer, r.num_layers) for r in result.ranks] == [(0, 14), (0, 14), (14, 13), (14, 13)]
    assert [r.predicted_bytes for r in result.ranks] == [14 * 2 * 73_728] * 2 + [13 * 2 * 73_728] * 2
    assert result.predicted_bytes == 2 * estimate_kv(spec, 1, 128)


@pytest.mark.slow
@needs_dist
def test_four_ranks_hybrid_tp2_pp2():
    # gpt-oss-20b: 24 layers alternating sliding (128) and full, 8 KV heads -> 4 per rank
    result = _launch("openai/gpt-oss-20b", 2, 2, batch=1, context=300)
    stage = plan_ranks(load_model("openai/gpt-oss-20b"), tp=2, pp=2, batch=1, context=300)
    assert [r.predicted_bytes for r in result.ranks] == [rp.plan.predicted_bytes for rp in stage]
    names = {c.name for c in result.ranks[0].components}
    assert {"full", "sliding 128"} <= names


@pytest.mark.slow
@needs_dist
def test_two_stages_of_a_hybrid_model_under_transformers():
    result = _launch("google/gemma-3-1b-it", 1, 2, batch=1, context=600, engine="hf")
    assert sum(r.predicted_bytes for r in result.ranks) == estimate_kv("google/gemma-3-1b-it", 1, 600, engine="hf")


@pytest.mark.slow
@needs_dist
def test_torchrun_runs_the_same_path_and_only_rank_0_prints():
    from kvplan.verify.distributed import free_port

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           "-m", "kvplan", "verify", "Qwen/Qwen3-0.6B", "--pp", "2", "--device", "cpu", "-b", "1", "-c", "256",
           "-f", "json", "--timeout", str(TIMEOUT_S)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S + 60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)  # one JSON document: rank 1 printed nothing
    assert data["launcher"] == "torchrun" and data["world_size"] == 2 and data["exact"]
    assert [r["exact"] for r in data["ranks"]] == [True, True]
    assert data["predicted_bytes"] == estimate_kv("Qwen/Qwen3-0.6B", 1, 256)


@pytest.mark.slow
@needs_dist
def test_torchrun_failure_is_reported_once_by_rank_0():
    # torchrun stops every rank at the first non-zero exit: rank 0 must still say why (regression)
    from kvplan.verify.distributed import free_port

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           "-m", "kvplan", "verify", "meta-llama/Llama-3.1-405B", "--tp", "2", "--device", "cpu", "-b", "4096",
           "-c", "128k", "--timeout", str(TIMEOUT_S)]  # petabytes: refused before allocating, on any machine
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S + 60)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kvplan:")]
    assert proc.returncode != 0
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: rank 0: the cache for batch 4096 x 131,072 tokens")
    assert lines[0].endswith("(and 1 more rank(s))")
    assert "rank total" in proc.stdout


@needs_dist
def test_one_rank_in_process_gives_the_json_fields(monkeypatch):
    from kvplan.verify.distributed import free_port, run_rank

    for name, value in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                            MASTER_PORT=str(free_port())).items():
        monkeypatch.setenv(name, value)
    data = run_rank("openai-community/gpt2", batch=2, context=100, device="cpu", timeout_s=TIMEOUT_S).to_dict()
    for key in ("kvplan_version", "model", "engine", "engine_version", "kv_dtype", "block_size", "batch", "context",
                "tp", "pp", "world_size", "backend", "launcher", "predicted_bytes", "measured_storage_bytes", "exact",
                "ranks", "notes"):
        assert key in data
    (rank,) = data["ranks"]
    assert set(rank) >= {"rank", "tp_rank", "pp_rank", "local_rank", "host", "device", "layers", "predicted_bytes",
                         "measured", "error_bytes", "exact", "buffers", "num_blocks", "components", "released",
                         "error"}
    assert rank["measured"]["storage_bytes"] == rank["predicted_bytes"] == estimate_kv("gpt2", 2, 100)
    assert rank["measured"]["reserved_bytes"] is None and rank["error"] is None


@needs_dist
def test_devices_and_backends(monkeypatch):
    import torch

    from kvplan.verify.distributed import rank_device

    dev, backend, note = rank_device("cpu", 3, 4)
    assert dev.type == "cpu" and backend == "gloo" and note is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VerifyError, match="--device cpu"):  # no device given: cuda:LOCAL_RANK, none here
        rank_device(None, 0, 2)


@needs_dist
def test_a_rank_that_cannot_allocate_reports_instead_of_hanging(monkeypatch):
    from kvplan.verify import allocate as al
    from kvplan.verify.distributed import _measure

    def refuse(plan, device, **kw):
        raise VerifyError("the cache for batch 1 needs 1 GiB on cpu, 0 B is free")

    monkeypatch.setattr(al, "allocate", refuse)
    import torch

    (rp,) = plan_ranks(load_model("gpt2"), batch=1, context=64)
    check = _measure(rp, torch.device("cpu"), 0)
    assert check.error and "0 B is free" in check.error and not check.exact
    assert check.to_dict()["error"] == check.error


# ------------------------------------------------------------------------------ command line

def _cli(args):
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    result = CliRunner().invoke(app, ["verify", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _fake_result(measured_delta=0, error=None):
    from kvplan.verify import ComponentCheck
    from kvplan.verify.distributed import RankCheck, RanksResult

    ranks = []
    for r in range(2):
        extra = measured_delta if r == 1 else 0
        ranks.append(RankCheck(r, r, 0, r, "host", "cpu", "cpu", None, 0, 2, 1000, 1000 + extra, 1000 + extra, None,
                               None, None, 2, 4, (ComponentCheck("full", "full", 2, 1000, 1000 + extra),), True,
                               error if r == 1 else None))
    return RanksResult("0", "m", "vllm", "0.33", "bfloat16", 16, 1, 64, 2, 1, "gloo", "launch", tuple(ranks), ())


@pytest.mark.parametrize("delta,error,code", [(0, None, 0), (512, None, 1), (0, "out of memory on cpu", 2)])
def test_cli_exit_status_follows_every_rank(monkeypatch, delta, error, code):
    import kvplan.verify.distributed as d

    monkeypatch.setattr(d, "launch", lambda model, **kw: _fake_result(delta, error))
    got, out, err = _cli(["gpt2", "--tp", "2", "--launch", "2", "--device", "cpu"])
    assert got == code
    assert "rank total" in out and "sum" in out
    if error:
        assert err.strip() == "kvplan: error: rank 1: out of memory on cpu"


def test_cli_refuses_ranks_without_a_launcher_in_one_line(monkeypatch):
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    from kvplan.cli import main

    assert main(["verify", "gpt2", "--tp", "2", "--device", "cpu"]) == 2
    assert main(["verify", "gpt2", "--tp", "2", "--launch", "3", "--device", "cpu"]) == 2
    assert main(["verify", "gpt2", "--tp", "2", "--launch", "2", "--decode"]) == 2


def test_cli_errors_are_one_line(monkeypatch, capsys):
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    from kvplan.cli import main

    main(["verify", "gpt2", "--tp", "2", "--device", "cpu"])
    assert capsys.readouterr().err == ("kvplan: error: --tp 2 --pp 1 is 2 ranks: run `torchrun --nproc-per-node 2 "
                                       "-m kvplan verify ...` or add --launch 2\n")
    main(["verify", "gpt2", "--tp", "2", "--launch", "3", "--device", "cpu"])
    assert capsys.readouterr().err == "kvplan: error: --launch 3 must equal --tp 2 x --pp 1 = 2\n"
