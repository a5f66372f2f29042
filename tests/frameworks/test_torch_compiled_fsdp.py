"""A `torch.compile`d FSDP2 model (`fully_shard` on each Linear and the model, then
`torch.compile(model, backend="aot_eager")`) on a real 2-process gloo job (`fsdp_job.py`,
layout `fsdp_compiled`), recorded with the two lines on the compiled model: its statistics
steps run eagerly, so every statistic of a sharded weight or gradient is the global tensor's
(equal to the NumPy reference of the tensor gathered in the job), its ReLU layers are
recorded, dead ReLUs are found and the healthy twin is quiet."""

from __future__ import annotations

from pathlib import Path

from test_torch_fsdp import WEIGHT_KEYS, check, compare_with_references, run

import mldbg
from mldbg.store import statistics as st


def test_compiled_fsdp2_records_the_global_tensors_and_is_quiet(tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    job = run(tmp_path / "healthy", "fsdp_compiled", refs=refs)
    compared = compare_with_references(job, refs)
    assert compared == WEIGHT_KEYS | {f"gradient:{k}" for k in st.DEFAULTS["gradients"]}
    trial = mldbg.create_trial(job)
    assert not any(name.startswith("_orig_mod") for name in trial.tensor_names())  # the model's names
    assert "1_input_0" in trial.tensor_names(collection="relu_activations")
    code, findings = check(job)
    assert code == 0 and not findings, findings


def test_dead_relus_of_a_compiled_fsdp2_model_are_found(tmp_path: Path) -> None:
    code, findings = check(run(tmp_path / "dead", "fsdp_compiled", "dead"))
    assert code == 1 and "dead_relu" in {f["rule"] for f in findings}, findings
