"""Several `mldbg plot` pages written together share one plotly.min.js (4.8 MB once, not per
page); one page alone still embeds it and opens offline. Real files, bytes measured."""

import re
import subprocess
import sys

from click.testing import CliRunner

from mldbg.cli.main import cli

NAMES = ["fc1.weight", "gradient/fc1.weight", "relu1_output_0"]


def _plot(*args):
    res = CliRunner().invoke(cli, ["plot", *args])
    assert res.exit_code == 0, res.output
    return res.output


def _sizes(folder):
    return {p.name: p.stat().st_size for p in folder.iterdir()}


def test_pages_written_together_share_one_plotly_js(blobs_run, tmp_path):
    inline, shared = tmp_path / "inline", tmp_path / "shared"
    _plot(str(blobs_run), "distribution", *NAMES, "-o", f"{inline}/", "--plotlyjs", "inline")
    output = _plot(str(blobs_run), "distribution", *NAMES, "-o", f"{shared}/")  # shared by default
    assert "plotly.min.js (shared by the pages beside it)" in output
    before, after = _sizes(inline), _sizes(shared)
    pages = sorted(n for n in after if n.endswith(".html"))
    assert pages == sorted(before) == ["distribution-fc1.weight.html", "distribution-gradient_fc1.weight.html",
                                       "distribution-relu1_output_0.html"]  # fmt: skip
    assert sorted(after) == [*pages, "plotly.min.js"]  # the bundle once
    bundle = after["plotly.min.js"]
    assert bundle > 1_000_000
    for page in pages:
        html = (shared / page).read_text()
        assert re.findall(r'<script[^>]*\ssrc="([^"]+)"', html) == ["plotly.min.js"]  # local, nothing else
        assert after[page] < 200_000 and before[page] > bundle  # each inline page carries the bundle
    total_before, total_after = sum(before.values()), sum(after.values())
    assert total_after < total_before / 2.5, (total_before, total_after)
    # the figures themselves are the same: an inline page minus the bundle is a shared page
    for page in pages:
        assert abs((before[page] - bundle) - after[page]) < 2_000


def test_the_shared_bundle_is_written_once_and_kept(blobs_run, tmp_path):
    out = tmp_path / "plots"
    _plot(str(blobs_run), "distribution", "fc1.weight", "gradient/fc1.weight", "-o", str(out) + "/")
    bundle = out / "plotly.min.js"
    first = bundle.stat().st_mtime_ns
    _plot(str(blobs_run), "histograms", "fc1.weight", "-o", str(out), "--plotlyjs", "shared")
    assert bundle.stat().st_mtime_ns == first  # the same bundle: not rewritten
    assert (out / "histograms-fc1.weight.html").stat().st_size < 200_000
    bundle.write_text("// an old plotly")  # a stale copy is replaced
    _plot(str(blobs_run), "distribution", "fc1.weight", "-o", str(out) + "/")
    assert bundle.stat().st_size > 1_000_000


def test_a_single_page_embeds_plotly_and_works_alone(blobs_run, tmp_path):
    out = tmp_path / "one.html"
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "plot", str(blobs_run), "distribution", "fc1.weight", "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.html"]
    html = out.read_text()
    assert not re.search(r"<script[^>]*\ssrc=", html) and len(html) > 1_000_000
