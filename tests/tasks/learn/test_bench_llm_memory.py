"""The LLM memory benchmark's two views (review 60 S4): with and without what it reads off a run's notes, and the
contract v7 fields it reads from the set's columns, else off the notes (tests/benchmarks/bench_llm_memory.py)."""

from __future__ import annotations

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.learn import llm_memory as m
from tests.benchmarks import bench_llm_memory as bench

COLUMNS = ("source_repo,source_path,commit,licence,model,params_billion,adapter,lora_rank,sharding,cpu_offload,"
           "tensor_parallel,pipeline_parallel,gpu_count,gpu_type,precision,micro_batch_size,seq_len,"
           "activation_checkpointing,other,peak_gb,metric,oom").split(",")


def _set(tmp_path, *runs: dict) -> object:
    base = dict.fromkeys(COLUMNS)
    base.update(source_repo="modelscope/ms-swift", source_path="examples/train/x.sh", tensor_parallel=1,
                pipeline_parallel=1, gpu_count=1, precision="BF16", micro_batch_size=1, seq_len=2048, peak_gb=20.0,
                oom=False, sharding="none", cpu_offload="none", activation_checkpointing="full")
    path = tmp_path / "runs.csv"
    pl.DataFrame([{**base, **r} for r in runs], schema_overrides={k: pl.String for k in ("lora_rank", "other")},
                 infer_schema_length=None).write_csv(path)
    return path


def test_the_set_read_as_logged_drops_what_the_notes_give(tmp_path):
    path = _set(tmp_path,
                {"model": "Qwen-7B", "adapter": "lora", "other": "liger kernel on; --sequence_parallel_size 2",
                 "gpu_count": 2},
                {"model": "Qwen-7B", "adapter": "none", "other": "LISA lisa_activated_layers=2; galore"})
    noted, logged = bench.job_rows(path), bench.job_rows(path, ())
    assert noted[c.LOSS_PRECISION].to_list() == ["fused", None]
    assert noted[c.ADAPTER].to_list() == ["lora", "lisa"]
    assert noted[c.CONTEXT_PARALLEL].to_list() == [2, 1]
    assert noted[c.OPTIMIZER].to_list()[1].startswith("galore")
    assert logged[c.LOSS_PRECISION].to_list() == [None, None]
    assert logged[c.ADAPTER].to_list() == ["lora", "none"]
    assert logged[c.CONTEXT_PARALLEL].to_list() == [1, 1]
    assert logged[c.OPTIMIZER].to_list() == [None, None]
    # still words (a column of nulls only would not pass the feature encoder of the night that scores them)
    assert logged.schema[c.OPTIMIZER] == logged.schema[c.LOSS_PRECISION] == pl.String
    # one value left out at a time: the others are still read
    assert bench.job_rows(path, ("adapter",))[c.ADAPTER].to_list() == ["lora", "lisa"]
    assert bench.job_rows(path, ("adapter",))[c.LOSS_PRECISION].to_list() == [None, None]


def test_the_v7_fields_come_from_the_set_s_columns_else_the_notes_and_move_the_prior(tmp_path):
    """Contract v7 (session 11): `expert_parallel` and `trained_modules` read from the set's columns where it has them,
    else off the notes ("EPn", `modules_to_save`: the replay `absent_fields` made, now the prior's own), and dropped
    as logged (`INFERRED`)."""
    mts = "embedding + output layer also trainable (modules_to_save)"
    path = _set(tmp_path,
                {"model": "Qwen-7B", "adapter": "lora", "lora_rank": "64", "other": mts, "seq_len": 256},
                {"model": "Qwen3-30B-A3B", "adapter": "none", "sharding": "zero1", "gpu_count": 4, "other": "EP4"},
                {"model": "Qwen-7B", "adapter": "none", "other": mts})  # full training: nothing to add
    noted, logged = bench.job_rows(path), bench.job_rows(path, ())
    assert noted[c.TRAINED_MODULES].to_list() == ["embeddings_and_head", None, None]
    assert noted[c.EXPERT_PARALLEL].to_list() == [None, 4, None]
    assert logged[c.TRAINED_MODULES].to_list() == [None] * 3 and logged[c.EXPERT_PARALLEL].to_list() == [None] * 3
    assert logged.schema[c.TRAINED_MODULES] == pl.String and logged.schema[c.EXPERT_PARALLEL] == pl.Int64
    with_fields, without = bench.estimates(noted)["prior"][0], bench.estimates(logged)["prior"][0]
    qwen = m.lookup("Qwen-7B")
    assert with_fields[0] > without[0] + qwen.embedding_params * 8 / m.GB  # the copies' weights, gradients, moments
    assert with_fields[1] < without[1] - 40  # 1 of 4 expert shares of a 30B MoE
    assert with_fields[2] == without[2]
    # a set carrying the columns: they win over the notes, and are kept as logged
    columns = _set(tmp_path, {"model": "Qwen3-30B-A3B", "adapter": "lora", "sharding": "zero1", "gpu_count": 4,
                              "other": "EP4", "expert_parallel": 2, "trained_modules": "head"})
    for rows in (bench.job_rows(columns), bench.job_rows(columns, ())):
        assert (rows[c.EXPERT_PARALLEL][0], rows[c.TRAINED_MODULES][0]) == (2, "head")


def test_gemini_s_auto_placement_comes_off_the_notes_and_fills_the_gpu(tmp_path):
    """Contract v8 (session 12): the run whose column says `all` but whose notes say Gemini's `placement_policy=auto`
    is read as `auto` (as `gpucast import mlflow` reads the plugin's `placement_policy`) and forecast at 0.9 of its
    GPU's 40 GiB; DeepSpeed's static offload beside it and the run as logged keep `all`."""
    common = {"model": "GPT-2-style 24B", "params_billion": 24, "adapter": "none", "sharding": "zero3",
              "cpu_offload": "all", "gpu_type": "A100-40GB", "precision": "FP16", "seq_len": 1024,
              "activation_checkpointing": "full"}
    path = _set(tmp_path, {**common, "other": "ColossalAI Gemini placement_policy=auto (dynamic CPU/GPU)"},
                {**common, "other": "DeepSpeed ZeRO-3 with offload_parameters+offload_optimizer (CPU)"})
    noted, logged = bench.job_rows(path), bench.job_rows(path, ())
    assert noted[c.CPU_OFFLOAD].to_list() == ["auto", "all"]
    assert logged[c.CPU_OFFLOAD].to_list() == ["all", "all"]
    with_word, without = bench.estimates(noted)["prior"][0], bench.estimates(logged)["prior"][0]
    assert with_word[0] == pytest.approx(0.9 * 40 * 2**30 / 1e9)
    assert without[0] < 10 and with_word[1] == without[1] == without[0]


def test_unsloth_s_kernels_come_off_the_notes_and_lower_the_prior(tmp_path):
    """Contract v8 `kernels` (session 12): the runs whose notes name unsloth as their method or backend; dropped as
    logged."""
    common = {"model": "Llama-2-7B", "adapter": "qlora", "lora_rank": "8", "micro_batch_size": 4, "seq_len": 1024}
    path = _set(tmp_path, {**common, "other": "method Unsloth+FA2; 4-bit base"}, {**common, "other": "method HF"})
    noted, logged = bench.job_rows(path), bench.job_rows(path, ())
    assert noted[c.KERNELS].to_list() == ["unsloth", None] and logged[c.KERNELS].to_list() == [None, None]
    assert logged.schema[c.KERNELS] == pl.String
    with_word, without = bench.estimates(noted)["prior"][0], bench.estimates(logged)["prior"][0]
    assert with_word[0] < without[0] - 2 and with_word[1] == without[1] == without[0]


def test_universal_llm_trainer_s_own_16_bit_loss_is_read_as_half_but_not_its_4_bit_or_fsdp_runs(tmp_path):
    """Session 14: universal-llm-trainer's single-GPU LoRA and full runs compute their own `nn.CrossEntropyLoss` on
    the bf16 logits with autocast off (`amp_training: False`): `loss_precision` `half`, which lowers the prior by the
    logits' 10 - 6.12 bytes; its 4-bit runs (an fp32 head) and FSDP runs stay `fp32`; dropped as logged."""
    common = {"source_repo": "ljm565/universal-llm-trainer", "source_path": "docs/gpu_test.md", "model": "Gemma-7B",
              "micro_batch_size": 2, "seq_len": 8192, "other": "HF model, own trainer; bf16 weights"}
    path = _set(tmp_path, {**common, "adapter": "lora", "lora_rank": "8"}, {**common, "adapter": "none"},
                {**common, "adapter": "qlora", "lora_rank": "8"},
                {**common, "adapter": "none", "sharding": "fsdp", "cpu_offload": "all", "gpu_count": 2})
    noted, logged = bench.job_rows(path), bench.job_rows(path, ())
    assert noted[c.LOSS_PRECISION].to_list() == ["half", "half", None, None]
    assert logged[c.LOSS_PRECISION].to_list() == [None] * 4
    half, fp32 = bench.estimates(noted)["prior"][0], bench.estimates(logged)["prior"][0]
    logits_gb = 2 * 8192 * m.lookup("Gemma-7B").vocab * (m.LOGIT_BYTES - m.LOSS_LOGIT_BYTES["half"]) / 1e9
    assert half[0] == pytest.approx(fp32[0] - logits_gb * m.ALLOCATOR_FACTOR, rel=0.02)
    assert half[2] == fp32[2] and half[3] == fp32[3]


def test_the_qwen_readme_s_deepspeed_runs_are_read_as_half_and_its_runs_without_deepspeed_not(tmp_path):
    """Session 14: Qwen-1's own loss on its 16-bit logits under DeepSpeed (no autocast): `loss_precision` `half` for
    the Qwen README's runs whose notes name DeepSpeed or its ZeRO config; its single-GPU runs without DeepSpeed (under
    autocast) and other sources' DeepSpeed runs stay `fp32`; dropped as logged."""
    common = {"source_repo": "QwenLM/Qwen", "source_path": "README.md", "model": "Qwen-7B-Chat-Int4", "adapter": "qlora",
              "lora_rank": "64", "precision": "FP16", "seq_len": 8192}
    path = _set(tmp_path, {**common, "other": "finetune_qlora_single_gpu.sh (DeepSpeed ZeRO-2 config on 1 GPU)"},
                {**common, "other": "finetune_lora_ds.sh; sharding = script default ds_config_zero2.json",
                 "sharding": "zero2", "gpu_count": 4},
                {**common, "other": "finetune_lora_single_gpu.sh (no DeepSpeed)"},
                {**common, "source_repo": "modelscope/ms-swift", "other": "swift sft, DeepSpeed ZeRO-2"})
    noted, logged = bench.job_rows(path), bench.job_rows(path, ())
    assert noted[c.LOSS_PRECISION].to_list() == ["half", "half", None, None]
    assert logged[c.LOSS_PRECISION].to_list() == [None] * 4
    half, fp32 = bench.estimates(noted)["prior"][0], bench.estimates(logged)["prior"][0]
    assert half[0] < fp32[0] - 4 and half[2] == fp32[2] and half[3] == fp32[3]


def test_leaving_a_model_out_of_the_table_hands_its_runs_to_the_fallbacks_and_puts_it_back():
    """`unseen_models`' swap (session 25): inside the block the left-out model is unknown and its family's other rows
    estimate it; after it, the table is whole again."""
    with bench.without("Qwen2.5-7B"):
        assert m.lookup("Qwen2.5-7B-Instruct") is None and m.lookup("Qwen2.5-14B") is not None
        assert m.kin("Qwen2.5-7B", 7.6e9).name in ("Qwen2.5-3B", "Qwen2.5-14B")
    assert m.lookup("Qwen2.5-7B-Instruct").name == "Qwen2.5-7B" and m.kin("Qwen2.5-7B", 7.6e9).name == "Qwen2.5-7B"
    with pytest.raises(RuntimeError), bench.without("Qwen2.5-7B"):
        raise RuntimeError("a failing block")
    assert m.lookup("Qwen2.5-7B").name == "Qwen2.5-7B" and m.kin("Qwen2.5-7B", 7.6e9).name == "Qwen2.5-7B"


def test_the_unseen_models_view_prints_the_table_and_both_fallbacks(tmp_path, capsys):
    path = _set(tmp_path, {"model": "Qwen2.5-7B-Instruct", "adapter": "lora", "peak_gb": 22.0},
                {"model": "Llama-3.1-8B", "adapter": "none", "peak_gb": 70.0, "gpu_count": 1, "seq_len": 1024})
    bench.unseen_models(bench.job_rows(path))
    out = capsys.readouterr().out
    assert "2 runs of 2 table models" in out
    apes = {}
    for way in ("the table (as shipped)", "left out: the family's nearest row (kin)", "left out: the power law alone"):
        assert way in out and out.split(way)[1].split("runs")[1].split()[0] == "2"
        apes[way] = out.split(way)[1].split("mean APE")[1].split()[0]
    assert len(set(apes.values())) == 3, apes  # each way its own prior: the model was left out, the name read or not
