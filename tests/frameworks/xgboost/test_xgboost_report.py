"""`mldbg report`: one self-contained HTML file with the XGBoost report's sections."""

from __future__ import annotations

import re

import numpy as np
from click.testing import CliRunner
from sklearn.metrics import auc, roc_curve

from mldbg.cli.main import cli
from mldbg.config import Mode, SaveConfig
from mldbg.record.recorder import Recorder
from mldbg.report import build_report
from mldbg.report.training import roc_curve as our_roc_curve

CLASSIFIER_SECTIONS = [
    "summary",
    "findings",
    "labels",
    "loss",
    "feature-importance",
    "trees",
    "confusion",
    "per-class",
    "roc",
]


def sections(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', page)


def assert_offline(page: str) -> None:
    assert "<script" not in page and "<link" not in page and "<img" not in page and "@import" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace is a name, never fetched


def test_binary_classifier_report_has_the_xgboost_sections(run):
    page = build_report(run("sane_classifier")["path"])
    assert sections(page) == CLASSIFIER_SECTIONS
    assert_offline(page)
    assert "XGBoost training report" in page and "No rule fired." in page
    assert "mean_radius" in page  # features by name
    assert page.count("<svg") >= 9


def test_regression_report_shows_residuals_not_roc(run):
    page = build_report(run("regression")["path"], check=False)
    assert sections(page) == [
        "summary",
        "findings",
        "labels",
        "loss",
        "feature-importance",
        "trees",
        "residuals",
    ]
    assert "Residuals (prediction - label)" in page and "rules were not run" in page
    assert_offline(page)


def test_multiclass_report_has_a_confusion_matrix_per_set(run):
    page = build_report(run("multiclass")["path"], check=False)
    assert "roc" not in sections(page) and "confusion" in sections(page)
    assert "validation at iteration 10" in page and "train at iteration 10" in page


def test_findings_of_the_rules_are_in_the_report(run):
    page = build_report(run("deep_trees")["path"], rules=["tree_depth"])
    findings = page[page.index('<section id="findings">') :]
    assert "<b>tree_depth</b> at step 0 (TRAIN)" in findings and "Try: Lower max_depth" in findings


def test_cli_writes_the_report(run, tmp_path):
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        cli, ["report", str(run("sane_classifier")["path"]), "-o", str(out), "--no-rules"]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output and sections(out.read_text()) == CLASSIFIER_SECTIONS
    missing = CliRunner().invoke(cli, ["report", str(tmp_path / "nothing"), "-o", str(out)])
    assert missing.exit_code == 2 and "no run at" in missing.output and "does not exist" in missing.output


def test_roc_curve_matches_scikit_learn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    s = np.round(y * 0.3 + rng.random(500), 2)  # ties included
    fpr, tpr = our_roc_curve(y, s)
    ref_fpr, ref_tpr, _ = roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, ref_fpr)
    np.testing.assert_allclose(tpr, ref_tpr)
    assert auc(fpr, tpr) == auc(ref_fpr, ref_tpr)


def test_a_run_of_another_framework_gets_the_sections_its_data_allows(tmp_path):
    rec = Recorder(
        tmp_path,
        save_config=SaveConfig(save_interval=1),
        include_collections=["losses", "labels", "predictions"],
    )
    rng = np.random.default_rng(0)
    for i in range(6):
        for mode in (Mode.TRAIN, Mode.EVAL):
            rec.start_step(mode)
            y = rng.integers(0, 3, 32)
            logits = np.eye(3)[y] * (i + 1) + rng.normal(size=(32, 3))
            rec.save_tensor("CrossEntropyLoss_output_0", np.float32(1.0 / (i + 1)), ("losses",))
            rec.save_tensor("CrossEntropyLoss_input_0", logits.astype(np.float32), ("predictions",))
            rec.save_tensor("CrossEntropyLoss_input_1", y, ("labels",))
            rec.end_step()
    rec.close()
    page = build_report(tmp_path, check=False)
    assert sections(page) == ["summary", "findings", "labels", "loss", "confusion", "per-class"]
    assert "mldbg: Training report" in page and "CrossEntropyLoss_output_0" in page
