"""TensorFlow's device statistics (`tf_statistics`) equal the NumPy reference on awkward
tensors, eagerly (`TFStatistics`) and inside a traced graph (`graph_statistics`), including
`delta_l2` and `sample_change` against the previous step, and the class statistics."""

from __future__ import annotations

from framework_jobs import run_job


def test_tf_statistics_equal_the_numpy_reference(tmp_path):
    manifest = run_job("tf_statistics_job.py", tmp_path)
    assert not manifest["wrong"], manifest["wrong"][:10]
    assert manifest["compared"] > 1000, manifest["compared"]
