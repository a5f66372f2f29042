"""The training report shows the diagnoses first (one per root cause, with its confidence, why
and one advice), the findings each explains below it (issue 26)."""

from mldbg.report.training import build_report
from tests.tiny import train


def test_the_report_shows_diagnoses_first(tmp_path):
    train(tmp_path / "run", lr=1e12, steps=30)
    page = build_report(tmp_path / "run")
    section = page[page.index('<section id="findings">') :]
    section = section[: section.index("</section>")]
    assert "the learning rate is too high" in section and "learning_rate_too_high" in section
    assert section.index("learning_rate_too_high") < section.index("exploding_tensor")
    assert "confidence" in section and "Why: " in section and "grouped into 1 diagnosis" in section
