"""A page of a run's scalars (`/scalars?limit=&offset=&match=`, issue #30): a run of many
scalar names sends the page the first `SCALARS_PAGE` of them (its losses always whole), and the
filter over the Scalars chart reaches every other by name. Over real HTTP against a real
recorded run, each page compared with the whole answer (what `/scalars` sent before pages),
then in a real headless Chromium."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mldbg.config import Mode, SaveConfig
from mldbg.dashboard.data import MANY_SCALARS, SCALARS_PAGE
from mldbg.record.recorder import Recorder
from tests.dashboard.helpers import Server, run_url

NAMES = 2100  # more than a page, than MANY_SCALARS (the table path) in a page, than the picker lists
STEPS = 4
LOSS = "loss"


def name(i: int) -> str:
    return f"metric/{i:06d}"


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """4 steps (the last one EVAL) of a loss and 2,100 scalars, one of them NaN at step 1,
    recorded in reverse order (the answer's is name order)."""
    path = tmp_path_factory.mktemp("scalars_page") / "many"
    rec = Recorder(str(path), save_config=SaveConfig(save_interval=1))
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        rec.start_step(Mode.EVAL if step == STEPS - 1 else Mode.TRAIN)
        rec.save_scalar(LOSS, float(1.0 / (step + 1)), collections=("losses",))
        values = rng.standard_normal(NAMES)
        if step == 1:
            values[7] = np.nan
        for i in reversed(range(NAMES)):
            rec.save_scalar(name(i), float(values[i]))
        rec.end_step()
    rec.close()
    log = tmp_path_factory.mktemp("scalars_page_log") / "server.log"
    with Server(str(path), "--no-rules", log=log) as server:
        yield server


def scalars(server, **params):
    return server.json(run_url("many") + "/scalars", **params)


def by_collection(body, collection):
    return [s for s in body["series"] if s["collection"] == collection]


def test_without_a_page_every_series_as_before(many):
    body = scalars(many)
    assert [s["name"] for s in by_collection(body, "losses")] == [LOSS]
    assert [s["name"] for s in by_collection(body, "scalars")] == [name(i) for i in range(NAMES)]
    assert body["scalars_total"] == NAMES
    (nan,) = [s for s in body["series"] if s["name"] == name(7)]
    assert nan["steps"] == list(range(STEPS)) and nan["modes"] == ["TRAIN"] * 3 + ["EVAL"]
    assert nan["values"][1] == "NaN" and all(math.isfinite(v) for i, v in enumerate(nan["values"]) if i != 1)


@pytest.mark.parametrize(
    ("size", "offsets"),
    [
        (SCALARS_PAGE, range(0, NAMES + SCALARS_PAGE, SCALARS_PAGE)),  # the table path, every page
        (10, [0, 10, 1000, NAMES - 10, NAMES - 5, NAMES]),  # the per-name path
        (0, [0, 100]),  # the losses alone
    ],
)
def test_pages_are_the_whole_answer_cut_in_name_order(many, size, offsets):
    assert SCALARS_PAGE + 1 > MANY_SCALARS > 10 + 1  # the sizes take both paths
    whole = scalars(many)
    loss = by_collection(whole, "losses")
    every = by_collection(whole, "scalars")
    seen = []
    for offset in offsets:
        page = scalars(many, limit=size, offset=offset)
        assert by_collection(page, "losses") == loss  # the losses whole on every page
        assert page["scalars_total"] == NAMES
        got = by_collection(page, "scalars")
        assert got == every[offset : offset + size]  # the same series, every field
        seen += got
    if size == SCALARS_PAGE:
        assert seen == every  # every name reached, once


def test_match_reaches_names_beyond_the_first_page_any_case(many):
    whole = by_collection(scalars(many), "scalars")
    body = scalars(many, limit=SCALARS_PAGE, match="METRIC/00204")
    assert body["scalars_total"] == 10
    assert by_collection(body, "scalars") == [s for s in whole if s["name"].startswith("metric/00204")]
    assert [s["name"] for s in by_collection(body, "losses")] == [LOSS]  # the filter is the scalars'
    none = scalars(many, limit=SCALARS_PAGE, match="no such name")
    assert none["scalars_total"] == 0 and by_collection(none, "scalars") == []


def test_since_with_a_page(many):
    body = scalars(many, since=1, limit=5, offset=3)
    assert [s["name"] for s in by_collection(body, "scalars")] == [name(i) for i in range(3, 8)]
    assert all(s["steps"] == [2, 3] for s in body["series"])


def test_the_several_runs_endpoint_takes_the_same_page(many):
    body = many.json("api/scalars", run="many", limit=3, offset=2045, match="metric")
    answer = body["runs"]["many"]
    assert answer == scalars(many, limit=3, offset=2045, match="metric")
    assert [s["name"] for s in by_collection(answer, "scalars")] == [name(i) for i in range(2045, 2048)]


@pytest.mark.parametrize("params", [{"limit": -1}, {"offset": -2}, {"limit": "x"}])
def test_a_bad_page_is_a_400_naming_it(many, params):
    status, body = many.get(run_url("many") + "/scalars", **params)
    assert status == 400
    assert next(iter(params)) in body["detail"]


SCALAR_TRACES = """() => [...new Set((document.getElementById('plot-scalars').data || [])
  .map(t => t.meta && t.meta.tensor))]"""


def test_the_page_shows_a_page_of_scalars_and_the_filter_reaches_any(browser, many):
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "scalars" in r.url else None)
    try:
        page.goto(f"{many.url}?events=off")
        page.wait_for_function(f"() => ({SCALAR_TRACES})().length === {SCALARS_PAGE}", timeout=30_000)
        assert page.evaluate(SCALAR_TRACES) == [name(i) for i in range(SCALARS_PAGE)]  # the first, in order
        assert all(f"limit={SCALARS_PAGE}" in url for url in asked)  # never the whole answer
        note = page.inner_text("#scalars-note")
        assert page.is_visible("#scalars-note") and f"{SCALARS_PAGE} of {NAMES:,} scalars" in note
        # the loss is drawn as before
        losses = page.evaluate("() => document.getElementById('plot-losses').data.map(t => t.meta.tensor)")
        assert set(losses) == {LOSS}

        page.fill("#scalars-filter", "metric/00204")  # names past the first page
        page.wait_for_function(f"() => ({SCALAR_TRACES})().length === 10", timeout=30_000)
        assert page.evaluate(SCALAR_TRACES) == [name(i) for i in range(2040, 2050)]
        assert not page.is_visible("#scalars-note")  # all of the matching ones are shown
        # its values are the server's (y of the TRAIN trace of metric/000245, steps 0-2)
        ys = page.evaluate(
            """() => document.getElementById('plot-scalars').data
              .filter(t => t.meta.tensor === 'metric/002045' && t.meta.mode === 'TRAIN' && !t.meta.raw)
              .map(t => Array.from(t.y))"""
        )
        want = [s for s in by_collection(scalars(many), "scalars") if s["name"] == name(2045)][0]
        assert [y for y in ys[0] if y is not None] == pytest.approx(want["values"][:3])

        page.fill("#scalars-filter", "no such name")
        page.wait_for_function(
            "() => document.getElementById('scalars-note').innerText.includes('no scalar')"
        )
        assert page.is_visible("#card-scalars") and page.is_visible("#scalars-filter")  # to type again

        page.fill("#scalars-filter", "")
        page.wait_for_function(f"() => ({SCALAR_TRACES})().length === {SCALARS_PAGE}", timeout=30_000)
        assert set(
            page.evaluate("() => document.getElementById('plot-losses').data.map(t => t.meta.tensor)")
        ) == {LOSS}
        assert problems == []
    finally:
        page.close()


PICKED = """() => (document.getElementById('plot-reduction').data || []).map(t => t.meta && t.meta.tensor)"""


def test_the_tensor_picker_lists_a_few_thousand_and_its_filter_reaches_the_rest(browser, many):
    """The picker lists at most 2,000 tensors (100,000 options took the browser seconds) and
    says how many more there are; its filter box finds any of them, which can be drawn."""
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    try:
        page.goto(f"{many.url}?events=off")
        page.wait_for_function("() => document.getElementById('tensor').options.length > 1", timeout=30_000)
        options = page.evaluate(
            "() => [...document.getElementById('tensor').options].map(o => [o.value, o.text])"
        )
        listed = [v for v, _ in options if v]
        assert len(listed) == 2000 and len(set(listed)) == 2000
        assert (
            options[-1][0] == "" and f"{NAMES + 1 - 2000} more" in options[-1][1]
        )  # the loss and the scalars
        assert name(2095) not in listed
        page.fill("#tensor-filter", "metric/00209")
        page.wait_for_function(
            "() => [...document.getElementById('tensor').options].some(o => o.value === 'metric/002095')"
        )
        found = page.evaluate("() => [...document.getElementById('tensor').options].map(o => o.value)")
        assert {name(i) for i in range(2090, 2100)} <= set(found) and len(found) <= 12  # and the chosen one
        page.select_option("#tensor", name(2095))
        page.wait_for_function(f"() => ({PICKED})().includes('{name(2095)}')", timeout=30_000)
        assert problems == []
    finally:
        page.close()
