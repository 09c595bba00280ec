"""Hostile text is shown as text: markup in a model's reply (from a real model server on loopback), in an evaluation's
episodes (written by a real evaluation of that model) and in a typed env name or policy reaches Chromium as inert
text. A script or handler that ran would set `window.pwned` or open a dialog; the test first checks that it would."""

from __future__ import annotations

import pytest

from wander import load_environment
from wander.core.policy import Reply
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import evaluate
from wander.policies.openai_server import create_app as model_app
from wander.policies.openai_server import serve_in_thread
from wander.ui.app import create_app
from wander.ui.run_config import RunConfig

from .conftest import ENV

MARK = "window.pwned=(window.pwned||0)+1"
HOSTILE = (
    f'<script>{MARK};alert("script")</script>"><img src=x onerror="{MARK};alert(\'img\')">'
    f'\'><svg onload="{MARK};alert(\'svg\')"></svg><a href="javascript:{MARK}">x</a>'
)
NAME = '"><img src=x onerror=alert(1)>'  # a hostile policy (row) name


class Hostile:
    """A model that answers every turn with markup."""

    def __call__(self, conversations):
        return [Reply(HOSTILE) for _ in conversations]


@pytest.fixture(scope="module")
def hostile_model():
    """The URL of an OpenAI-compatible server on loopback whose model answers with HOSTILE."""
    with serve_in_thread(model_app(lambda seed: Hostile(), "hostile")) as url:
        yield url


@pytest.fixture(scope="module")
def page(browser):
    """A Chromium page that records every dialog a script opens."""
    page = browser.new_page()
    page.set_default_timeout(30_000)
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    page.close()


def assert_inert(page) -> None:
    """No script of the page's text ran: no `window.pwned`, no dialog (after the broken images have failed)."""
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.pwned") is None and page.dialogs == [], page.dialogs


@pytest.mark.slow
def test_the_detector_sees_a_script_that_runs(page):
    page.set_content(f"<!doctype html><body>{HOSTILE}</body>")
    page.wait_for_load_state("networkidle")
    page.wait_for_function(
        "window.pwned >= 2"
    )  # the <script> and the onerror (the svg's onload: Chromium's call)
    assert "script" in page.dialogs and "img" in page.dialogs
    page.dialogs.clear()


@pytest.mark.slow
def test_a_models_hostile_reply_is_inert(run_config, hostile_model, page):
    with serve_in_thread(create_app(run_config), api_path="", probe_path="/play", startup_timeout=60) as url:
        page.goto(url + "/play")
        page.fill("input[name=policy]", hostile_model)
        page.check("input[name=side][value=second]")
        page.click("#start")
        assert HOSTILE in page.inner_text("#replies")  # shown, as the text it is, marked invalid
        assert "invalid reply" in page.inner_text("#replies")
        assert page.locator("#replies img, #replies script, #replies svg").count() == 0
        assert_inert(page)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, hostile_model):
    """A run whose evaluation (a real one) played the hostile model under a hostile row name."""
    root = tmp_path_factory.mktemp("hostile-run")
    config = EvaluateConfig(
        policies={NAME: hostile_model},
        references=[],
        opponents=["random"],
        games=1,
        max_new_tokens=8,
        out_dir=str(root / "data/eval"),
        baseline=None,
    )
    evaluate(config, env=load_environment("tictactoe", **ENV))
    return root


@pytest.mark.slow
def test_hostile_episodes_replay_inert(hostile_run, page):
    with serve_in_thread(
        create_app(RunConfig(hostile_run, env={"name": "tictactoe", **ENV})),
        api_path="",
        probe_path="/play",
        startup_timeout=60,
    ) as url:
        page.goto(url + "/episodes")
        assert NAME in page.inner_text("table")
        assert_inert(page)
        page.locator("table a").first.click()  # the hostile row's cell
        assert NAME in page.inner_text("h1")
        assert_inert(page)
        page.locator("a:text('game 0')").click()
        page.click("text=end")
        assert HOSTILE in page.inner_text("main") and page.locator(".msg.assistant").count() >= 1
        assert page.locator("main img, main script, main svg").count() == 0
        assert_inert(page)


@pytest.mark.slow
def test_a_hostile_env_name_and_policy_are_inert(run_config, page):
    with serve_in_thread(create_app(run_config), api_path="", probe_path="/play", startup_timeout=60) as url:
        for field, other in (("env", ("policy", "minimax")), ("policy", ("env", ""))):
            page.goto(url + "/play")
            page.fill(f"input[name={field}]", HOSTILE)
            page.fill(f"input[name={other[0]}]", other[1])
            page.click("#start")
            refusal = page.inner_text(".error")  # it quotes the value (repr: its quotes escaped), as text
            assert "<script>" in refusal and "<img src=x onerror=" in refusal, refusal
            assert page.input_value(f"input[name={field}]") == HOSTILE  # the form gives it back unchanged
            assert_inert(page)
