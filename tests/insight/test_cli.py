"""`mldbg plot` and `mldbg export-tensorboard`: files written, exit 0; clear errors, exit 2."""

import re

import pytest
from click.testing import CliRunner

from mldbg.cli.main import cli


@pytest.mark.parametrize(
    "args",
    [
        ["distribution", "fc1.weight"],
        ["histograms", "gradient/fc1.weight", "--step", "0", "--step", "5", "--style", "slider"],
        ["tsne", "relu1_output_0", "--mode", "eval"],
        ["confusion", "--slider"],
    ],
)
def test_plot_writes_a_self_contained_html_file(blobs_run, tmp_path, args):
    out = tmp_path / "plot.html"
    res = CliRunner().invoke(cli, ["plot", str(blobs_run), *args, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output
    html = out.read_text()
    assert "<script" in html and not re.search(r"<script[^>]*\ssrc=", html)  # nothing to fetch
    assert len(html) > 1_000_000  # plotly.js inlined


def test_plot_saliency_default_output_name(images_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["plot", str(images_run[0]), "saliency", "--step", "1", "--samples", "2"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "saliency.html").stat().st_size > 1_000_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["distribution", "fc9.weight"], "no tensor 'fc9.weight'"),
        (["tsne", "relu9_output_0"], "no tensor 'relu9_output_0'"),
        (["saliency", "pixels"], "no tensor 'gradient/pixels'"),
        (["tsne"], "needs a tensor NAME"),
        (["tsne", "out.weight"], "only 3 samples"),
    ],
)
def test_plot_errors_exit_2_and_name_the_tensor(blobs_run, tmp_path, args, message):
    out = tmp_path / "x.html"
    res = CliRunner().invoke(cli, ["plot", str(blobs_run), *args, "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert message in res.output and "mldbg plot: error" in res.output
    assert not out.exists()


def test_plot_png_without_kaleido_is_a_clear_error(blobs_run, tmp_path):
    res = CliRunner().invoke(
        cli, ["plot", str(blobs_run), "distribution", "fc1.weight", "-o", str(tmp_path / "a.png")]
    )
    assert res.exit_code == 2 and "needs kaleido" in res.output


def test_export_tensorboard(blobs_run, tmp_path):
    res = CliRunner().invoke(cli, ["export-tensorboard", str(blobs_run), str(tmp_path / "tb")])
    assert res.exit_code == 0, res.output
    assert f"{tmp_path / 'tb' / 'train'}: 72 scalars" in res.output
    assert f"{tmp_path / 'tb' / 'eval'}: 3 scalars" in res.output
    assert "tensorboard --logdir" in res.output
    for mode in ("train", "eval"):
        (f,) = (tmp_path / "tb" / mode).iterdir()
        assert f.name.startswith("events.out.tfevents.") and f.stat().st_size > 0


def test_export_tensorboard_of_no_run_exits_2(tmp_path):
    res = CliRunner().invoke(cli, ["export-tensorboard", str(tmp_path / "missing"), str(tmp_path / "tb")])
    assert res.exit_code == 2 and "no run at" in res.output
