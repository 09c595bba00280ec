"""The registry and the curves reach the pages through the tracking store the UI is handed: with the run's MLflow
store (read through MLflow's client) the Curves page shows the registered champion and the stage's curve and
`champion` plays its checkpoint; with none (the library's `wander ui`) both panels say so in one line and how to
get one, and what the run's files hold is still shown; a store that does not answer is that line too."""

from __future__ import annotations

import html
from pathlib import Path

import httpx

from wander.policies.openai_server import serve_in_thread
from wander.ui.app import create_app
from wander.ui.tracking_store import NO_STORE, StageCurves, TrackingStoreError

from .conftest import post_form


class Unanswering:
    """A tracking store whose server is down."""

    location = "http://***@mlflow.example:5000"

    def _down(self, *args: object) -> None:
        raise TrackingStoreError(f"could not read the tracking store at {self.location}: connection refused")

    versions = checkpoint = curves = _down


def pages(app) -> tuple[str, httpx.Response]:
    """The Curves page's text and the answer to starting a game against `champion`."""
    with serve_in_thread(app, api_path="", probe_path="/play", startup_timeout=60) as url:
        curves = httpx.get(url + "/curves", timeout=30)
        champion = post_form(url, "/play/new", {"policy": "champion", "side": "second"})
    assert curves.status_code == 200, curves.text[-500:]
    return html.unescape(curves.text), champion


def test_the_store_gives_the_registry_the_curves_and_the_champion(run_root, run_config, run_store):
    versions = run_store.versions("wander-tictactoe")
    assert [(v.version, v.aliases, v.tags["wander.checkpoint"]) for v in versions] == [
        (1, ["champion"], "data/models/base")
    ]
    assert run_store.curves() == [
        StageCurves("build_model", {"loss": [(s, 2.0 / (s + 1)) for s in range(5)]})
    ]
    assert (
        run_store.checkpoint("wander-tictactoe", "champion") == Path(run_root).resolve() / "data/models/base"
    )
    curves, champion = pages(create_app(run_config, store=run_store))
    assert "wander-tictactoe v1 @champion" in curves and curves.count("<svg") == 1
    assert NO_STORE not in curves
    assert champion.status_code == 303  # a game against the champion's checkpoint started


def test_without_a_store_the_panels_say_so_and_the_files_are_still_shown(run_config):
    curves, champion = pages(create_app(run_config))
    said = NO_STORE[0].upper() + NO_STORE[1:]
    assert curves.count(said) == 2  # the registry's panel and the curves' panel, one line each
    assert "make app" in said and "python -m flows.ui" in said
    assert (
        "data-stage='base'" in curves and "parameters 61000" in curves
    )  # the lineage and its stage's metrics
    assert (
        champion.status_code == 400 and "no registered champion: no tracking store connected" in champion.text
    )


def test_a_store_that_does_not_answer_is_one_line_on_each_page(run_config):
    curves, champion = pages(create_app(run_config, store=Unanswering()))
    assert curves.count("Could not read the tracking store at http://***@mlflow.example:5000") == 2
    assert "data-stage='base'" in curves
    assert champion.status_code == 400
    assert "no registered champion: could not read the tracking store" in html.unescape(champion.text)
