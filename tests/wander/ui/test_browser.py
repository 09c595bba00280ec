"""`wander ui` in a real browser: headless Chromium (Debian's, `make browser`) driven by Playwright plays a whole game
through the page, a chess game's first moves, shows the champion's invalid replies as such, refuses bad input on the page, replays an
evaluation game move by move, and shows the lineage and curves; each view is screenshotted."""

from __future__ import annotations

import html

import httpx
import pytest

from wander.policies.openai_server import serve_in_thread
from wander.ui.app import create_app

from .conftest import post_form


@pytest.fixture(scope="module")
def ui_url(run_config, run_store):
    """The UI of the tiny run and its tracking store, on a loopback port."""
    with serve_in_thread(
        create_app(run_config, seed=1, store=run_store), api_path="", probe_path="/play", startup_timeout=60
    ) as url:
        yield url


@pytest.mark.slow
def test_a_person_plays_a_whole_game_against_a_scripted_policy(ui_url, browser_page, tmp_path):
    page = browser_page
    page.goto(ui_url + "/play")
    page.fill("input[name=policy]", "minimax")
    page.check("input[name=side][value=first]")
    page.click("#start")
    assert page.inner_text("#person-mark") == "X"
    moves = 0
    while page.locator("#game-over").count() == 0:
        page.locator(".board button").first.click()  # the first free cell
        moves += 1
        assert moves <= 5, "a game of tic-tac-toe lasts at most 5 of the first player's moves"
    assert "Game over" in page.inner_text("#game-over")
    replies = page.inner_text("#replies")
    assert "<move>" in replies and "person" in replies  # the policy's raw replies next to the board
    marks = [page.inner_text(f".board [data-cell='{i}']") for i in range(9)]
    assert marks.count("X") == moves and marks.count("O") in (moves - 1, moves)
    assert "outcome" in page.content()  # the rubric's values at the end
    page.screenshot(path=str(tmp_path / "play.png"), full_page=True)
    assert (tmp_path / "play.png").stat().st_size > 5_000


@pytest.mark.slow
def test_a_person_plays_chess_against_the_engine(ui_url, browser_page, tmp_path):
    page = browser_page
    page.goto(ui_url + "/play")
    page.fill("input[name=policy]", "stockfish")
    page.fill("input[name=env]", "chess")
    page.check("input[name=side][value=first]")
    page.click("#start")
    assert page.inner_text("#person-mark") == "white"
    assert page.locator(".board [data-cell]").count() == 64 and page.locator(".moves button").count() == 20
    page.click(".moves button[data-move=e2e4]")
    assert page.inner_text(".board [data-cell='36']") == "♙"  # e4: rank 4 is the fifth row from the top
    assert "<move>" in page.inner_text("#replies")  # the engine's raw reply, then the person's next moves
    assert page.locator(".moves button").count() > 20
    page.fill("#move-text", "e4e5x")
    page.click("form:has(#move-text) button")
    assert "'e4e5x' is not a move here: give a move in UCI (e2e4)" in page.inner_text(".error")
    page.screenshot(path=str(tmp_path / "chess.png"), full_page=True)
    assert (tmp_path / "chess.png").stat().st_size > 5_000


@pytest.mark.slow
def test_the_champions_invalid_replies_are_shown_and_bad_input_is_refused_on_the_page(ui_url, browser_page):
    page = browser_page
    page.goto(ui_url + "/play")
    page.fill("input[name=policy]", "champion")  # the registry's alias: the untrained tiny model
    page.check("input[name=side][value=second]")
    page.click("#start")
    assert "invalid reply" in page.inner_text("#replies")  # its replies are not moves: shown, not a crash
    assert page.locator("#game-over").count() == 1  # out of turns
    page.goto(ui_url + "/play")
    page.fill("input[name=policy]", "minimax")
    page.click("#start")
    page.fill("#move-text", "nine")
    page.click("form:has(#move-text) button")
    assert "'nine' is not a move here: give a free cell's number" in page.inner_text(".error")
    page.goto(ui_url + "/play")
    page.fill("input[name=policy]", "no/such/model")
    page.click("#start")
    assert "'no/such/model' is not a model folder under the project" in page.inner_text(".error")


@pytest.mark.slow
def test_episodes_replay_and_curves_views(ui_url, browser_page, tmp_path):
    page = browser_page
    page.goto(ui_url + "/episodes")
    page.screenshot(path=str(tmp_path / "episodes.png"), full_page=True)
    assert "any_invalid" in page.content()
    # The tiny model's games with an invalid move, in its first cell; then the first of them, replayed.
    page.locator("table tr:has(td:text-is('base'))").first.locator("a[href*='flag=any_invalid']").click()
    assert page.inner_text("#shown").startswith("2 of 2 games where any_invalid = 1")
    page.locator("a:text('game 0')").click()
    total = int(page.inner_text("#step").split(" of ")[1].split(":")[0])
    page.click("text=start")
    assert page.inner_text("#step").startswith(f"After reply 0 of {total}")
    assert page.locator(".msg.assistant").count() == 0
    page.click("text=next")
    assert page.inner_text("#step").startswith(f"After reply 1 of {total}")
    assert page.locator(".msg.assistant").count() == 1
    assert "Worst case of base" in page.content() and "(invalid)" in page.content()  # the exact line
    page.screenshot(path=str(tmp_path / "replay.png"), full_page=True)

    page.goto(ui_url + "/curves")
    lineage = page.inner_text("#lineage")
    assert "base" in lineage and "wander-tictactoe v1 @champion" in lineage
    assert page.locator("#curves svg").count() == 1  # the stage run's loss curve
    page.screenshot(path=str(tmp_path / "curves.png"), full_page=True)
    assert all((tmp_path / f"{name}.png").stat().st_size > 5_000 for name in ("episodes", "replay", "curves"))


def test_bad_requests_get_their_reason_on_the_page(ui_url):
    def error(response: httpx.Response) -> str:
        return html.unescape(response.text.split('role="alert">')[1].split("</p>")[0])

    def get(path: str) -> httpx.Response:
        return httpx.get(ui_url + path, timeout=60)

    cell = "/episodes/cell?policy=base&opponent=random&side=first"
    cases = [
        (get("/play/nope"), 404, "no game 'nope'"),
        (get(cell + "&flag=colour"), 400, "unknown filter 'colour'"),
        (get("/episodes/cell?policy=x&opponent=random&side=first"), 404, "no cell x x random (first)"),
        (
            get("/episodes/game?policy=base&opponent=random&side=first&index=99"),
            404,
            "no game 99 in this cell",
        ),
        (
            post_form(ui_url, "/play/new", {"policy": "minimax", "env": "nope"}),
            400,
            "unknown environment 'nope'",
        ),
        (post_form(ui_url, "/play/new", {"policy": " "}), 400, "name a policy"),
    ]
    for response, status, reason in cases:
        assert response.status_code == status and reason in error(response), (reason, response.text[-300:])
