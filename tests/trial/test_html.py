"""Notebook views: `_repr_html_` of a Trial, a Tensor, a Finding and `mldbg.check`'s findings.

The HTML must parse, hold no markup from the run's own names (a hostile tensor name), and
carry the sparkline of the loss (a tensor's value or l2).
"""

from html.parser import HTMLParser

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.rules.base import Finding, Findings
from mldbg.trial.html import sparkline

HOSTILE = "<script>alert('x')</script>&w"
VOID = {"br", "hr", "img", "input", "meta", "link"}


class Checked(HTMLParser):
    """Parses HTML, checks that tags nest and close, and collects tags, text and SVG points."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.tags, self.text, self.points = [], [], [], []
        self.feed(text)
        self.close()
        assert not self.stack, f"unclosed: {self.stack}"

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "polyline":
            self.points.append(dict(attrs)["points"])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "polyline":
            self.points.append(dict(attrs)["points"])

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("html"))
    rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1))
    for s in range(30):
        rec.start_step(mldbg.Mode.EVAL if s % 10 == 9 else mldbg.Mode.TRAIN)
        rec.save_tensor("loss", np.float32(2.0 / (s + 1)), ("losses",))
        rec.save_tensor(HOSTILE, np.full((3, 4), s, dtype=np.float32), ("weights",))
        rec.end_step()
    rec.close()
    return out


def test_trial_summary_parses_escapes_and_draws_the_loss(run):
    trial = mldbg.create_trial(run)
    html = trial._repr_html_()
    page = Checked(html)
    assert "script" not in page.tags and "svg" in page.tags and "polyline" in page.tags
    text = " ".join(page.text)
    assert run in text and "complete" in text and "TRAIN 27, EVAL 3" in text and "worker_0" in text
    assert "loss (loss)" in text
    (points,) = page.points
    assert len(points.split()) == 27  # the TRAIN losses, one point each
    ys = [float(p.split(",")[1]) for p in points.split()]
    assert ys == sorted(ys)  # the loss falls: y grows downwards in SVG


def test_tensor_summary_escapes_a_hostile_name_and_draws_its_l2(run):
    trial = mldbg.create_trial(run)
    html = trial.tensor(HOSTILE)._repr_html_()
    page = Checked(html)
    assert "script" not in page.tags and "<script>" not in html
    text = " ".join(page.text)
    assert HOSTILE in text  # shown as text, escaped in the markup
    assert "(3, 4)" in text and "float32" in text and "l2" in text
    assert len(page.points) == 1 and len(page.points[0].split()) == 30
    loss = Checked(trial.tensor("loss")._repr_html_())
    assert "value" in " ".join(loss.text) and len(loss.points) == 1


def test_findings_table_with_severity_and_escaped_message(run):
    found = mldbg.check(run, rules=["exploding_tensor"])
    assert isinstance(found, Findings) and found == []
    assert "No findings" in found._repr_html_()
    f = Finding(
        "exploding_tensor", 4, "TRAIN", f"NaN in {HOSTILE}", tensors=[HOSTILE], suggestion="lower <lr>"
    )
    w = Finding("low_gpu_utilization", 5, None, "GPU idle 80%", severity="warning")
    for html in (f._repr_html_(), Findings([f, w])._repr_html_()):
        page = Checked(html)
        assert "script" not in page.tags and "table" in page.tags
        text = " ".join(page.text)
        assert "error" in text and f"NaN in {HOSTILE}" in text and "lower <lr>" in text
    assert "warning" in " ".join(Checked(Findings([f, w])._repr_html_()).text)
    assert "2 findings" in Findings([f, w])._repr_html_()


def test_sparkline_leaves_out_nan_and_marks_it():
    svg = sparkline([1.0, float("nan"), 3.0, float("inf")])
    page = Checked(svg)
    assert len(page.points[0].split()) == 2 and page.tags.count("circle") == 2
    assert sparkline([float("nan")]) == "" and sparkline([]) == ""


def test_insight_figures_show_inline(run):
    """mldbg.insight returns Plotly figures: Jupyter shows them through Plotly's own repr
    (a mime bundle under IPython, HTML here)."""
    from mldbg import insight

    fig = insight.distribution(run, HOSTILE)
    html = fig._repr_html_()
    assert html.startswith("<div") and "Plotly.newPlot" in html
