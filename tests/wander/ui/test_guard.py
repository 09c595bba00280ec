"""`wander ui` takes forms from its own pages only: a real server on loopback refuses a form posted from another
origin (by Chromium, from a page of another site, and by a plain client), a form without the server's CSRF token,
a Host that is not the server (DNS rebinding) and a body over its limit; each refusal is a 403 (413) that starts no
game, and the UI's own form still works."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from wander.policies.openai_server import serve_in_thread
from wander.ui.app import MAX_BODY, create_app

from .conftest import csrf_token, post_form

GAME = {"policy": "minimax", "side": "second"}  # minimax moves at once: a started game changes the board


@pytest.fixture(scope="module")
def ui(run_config):
    """(url, app) of the tiny run's UI on a loopback port."""
    app = create_app(run_config, seed=2)
    with serve_in_thread(app, api_path="", probe_path="/play", startup_timeout=60) as url:
        yield url, app


def games(app: FastAPI) -> int:
    """How many games the UI holds."""
    return len(app.state.ui.games)


def test_the_ui_s_own_form_starts_a_game(ui):
    url, app = ui
    before = games(app)
    response = post_form(url, "/play/new", GAME, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].startswith("/play/g")
    assert games(app) == before + 1
    page = httpx.get(url + response.headers["location"], timeout=30)
    assert page.status_code == 200 and 'name="csrf"' in page.text  # the game's own forms carry the token too


def test_a_form_from_another_origin_or_without_the_token_changes_nothing(ui):
    url, app = ui
    token = csrf_token(url)
    host = urlsplit(url).netloc
    refused = {
        "another origin, right token": dict(
            data={**GAME, "csrf": token}, headers={"Origin": "http://evil.example"}
        ),
        "another port of loopback": dict(
            data={**GAME, "csrf": token}, headers={"Origin": "http://127.0.0.1:1"}
        ),
        "an opaque origin": dict(data={**GAME, "csrf": token}, headers={"Origin": "null"}),
        "a referer of another site": dict(
            data={**GAME, "csrf": token}, headers={"Referer": "http://evil.example/form.html"}
        ),
        "own origin, no token": dict(data=GAME, headers={"Origin": url}),
        "own origin, a wrong token": dict(data={**GAME, "csrf": token[:-1] + "x"}, headers={"Origin": url}),
        "no origin, no token": dict(data=GAME, headers={}),
        "the token in a JSON body": dict(json={**GAME, "csrf": token}, headers={"Origin": url}),
    }
    for case, request in refused.items():
        before = games(app)
        for path in ("/play/new", "/play/g0-anything/move", "/play/g0-anything/turn"):
            response = httpx.post(url + path, timeout=30, follow_redirects=False, **request)
            assert response.status_code == 403, (case, path, response.status_code)
            assert "refused" in response.text or "CSRF token" in response.text, (case, response.text[-300:])
        assert games(app) == before, case
    # The token in its header (what a script of the UI's own origin would send) is accepted.
    response = httpx.post(
        url + "/play/new",
        data=GAME,
        headers={"X-CSRF-Token": token, "Origin": f"http://{host}"},
        follow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 303


def test_a_host_that_is_not_the_server_is_refused_even_to_read(ui):
    url, _ = ui
    port = urlsplit(url).port
    for host in (
        "evil.example",
        f"evil.example:{port}",
        f"127.0.0.1:{port + 1}",
        f"localhost.evil:{port}",
        "",
    ):
        response = httpx.get(url + "/play", headers={"Host": host}, timeout=30)
        assert response.status_code == 403 and "is not this server" in response.text, host
        assert 'name="csrf"' not in response.text  # the token never reaches another site's page
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        assert httpx.get(url + "/play", headers={"Host": host}, timeout=30).status_code == 200, host


def test_a_body_over_the_limit_is_refused_before_it_is_read(ui):
    url, app = ui
    before = games(app)
    response = post_form(url, "/play/new", {**GAME, "text": "x" * (MAX_BODY + 1)}, follow_redirects=False)
    assert response.status_code == 413 and str(MAX_BODY) in response.text
    assert games(app) == before


@pytest.fixture(scope="module")
def evil_site(ui):
    """Another site on another loopback port: a page that posts the UI's new-game form as soon as it loads."""
    url, _ = ui
    site = FastAPI()
    form = (
        f'<form method="post" action="{url}/play/new">'
        + "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in GAME.items())
        + "</form><script>document.forms[0].submit()</script>"
    )

    @site.get("/")
    def attack() -> HTMLResponse:
        return HTMLResponse(f"<!doctype html><html><body>{form}</body></html>")

    with serve_in_thread(site, api_path="", probe_path="/") as site_url:
        yield site_url


@pytest.mark.slow
def test_chromium_posting_from_another_site_gets_403_and_no_game(ui, evil_site, browser):
    url, app = ui
    page = browser.new_page()
    try:
        before = games(app)
        with page.expect_response(lambda r: r.url == url + "/play/new") as answer:
            page.goto(evil_site + "/")
        assert answer.value.status == 403
        assert (
            answer.value.request.headers.get("origin") == evil_site
        )  # the browser named the page that posted
        assert "refused" in page.inner_text(".error")
        assert games(app) == before
        # DNS rebinding: a name of the attacker's, resolved to loopback, reaches the UI's port: refused.
        port = urlsplit(url).port
        response = page.goto(f"http://evil.example:{port}/play")
        assert response is not None and response.status == 403
        assert "csrf" not in page.content()
        # The UI's own page, in the same browser, starts a game.
        page.goto(url + "/play")
        page.fill("input[name=policy]", "minimax")
        page.click("#start")
        assert page.locator("#person-mark").count() == 1 and games(app) == before + 1
    finally:
        page.close()
