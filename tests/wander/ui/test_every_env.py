"""Every environment the Play form lists, posted through the UI's own guard (its Host, Origin and CSRF token), starts
a game or gets a 400 naming the problem, and so does one turn of each game: never a 500. On this machine, and on
one without the tools some envs need (bubblewrap for coding's sandbox, Stockfish for chess), where `wander ui`
answered Play with env coding with a 500."""

from __future__ import annotations

import html
import re

import httpx
import pytest

from wander.core.registry import environment_names
from wander.policies.openai_server import serve_in_thread
from wander.ui.app import create_app

from .conftest import post_form

POLICIES = ["champion", "teacher"]  # the registered tiny model, and the scripted teacher every env has
SIDES = ["first", "second"]


# Without the tools first: chess keeps the engine's answers for the process, which would spare a later game the
# engine the first one found.
@pytest.fixture(scope="module", params=["no tools on PATH", "this machine"])
def ui(request, run_config, run_store, tmp_path_factory):
    """The tiny run's UI on a loopback port; with `no tools on PATH`, PATH is an empty folder (no bwrap, no
    stockfish) while it serves, and Debian's own Stockfish path, which chess also looks in, is one that is not."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "no tools on PATH":
            patch.setenv("PATH", str(tmp_path_factory.mktemp("empty-path")))
            patch.setattr("envs.chess.engine.DEBIAN_PATH", "/nonexistent/stockfish")
        app = create_app(run_config, seed=2, store=run_store)
        with serve_in_thread(app, api_path="", probe_path="/play", startup_timeout=60) as url:
            yield url


def listed_envs(url: str) -> list[str]:
    """The environments the Play form's datalist offers."""
    form = httpx.get(url + "/play", timeout=30).text
    found = re.search(r'<datalist id="envs">(.*?)</datalist>', form)
    assert found, "the Play form lists no environments"
    return [html.unescape(name) for name in re.findall(r'<option value="([^"]*)">', found.group(1))]


def assert_page_or_named_400(response: httpx.Response, what: str) -> None:
    """A page (200 or a redirect to one) or a 400 whose error box says what is wrong."""
    assert response.status_code in (200, 303, 400), f"{what}: {response.status_code}\n{response.text[-2000:]}"
    if response.status_code == 400:
        error = re.search(r'<p class="error" role="alert">(.+?)</p>', response.text, re.S)
        assert error and error.group(1).strip(), f"{what}: a 400 that names no problem"


def one_turn(url: str, game: str, page: str) -> httpx.Response:
    """The game page's own next form: a move of the board (the first one offered), else the policy's turn."""
    move = re.search(r'<button name="move" value="([^"]+)"', page)
    if move:
        return post_form(url, f"{game}/move", {"move": html.unescape(move.group(1))})
    return post_form(url, f"{game}/turn", {"who": "policy"})


def test_every_listed_env_starts_a_game_or_says_why_never_a_500(ui, run_config):
    url = ui
    listed = listed_envs(url)
    assert listed == sorted({*environment_names(), run_config.env_name}) and "coding" in listed
    for env in listed:
        for policy in POLICIES:
            for side in SIDES:
                what = f"env {env}, policy {policy}, side {side}"
                started = post_form(
                    url, "/play/new", {"policy": policy, "env": env, "side": side}, follow_redirects=False
                )
                assert_page_or_named_400(started, what)
                if started.status_code != 303:
                    continue
                game = started.headers["location"]
                page = httpx.get(url + game, timeout=60)
                assert page.status_code == 200, f"{what}: the game page answered {page.status_code}"
                if 'id="game-over"' not in page.text:
                    assert_page_or_named_400(one_turn(url, game, page.text), f"{what}, one turn")
