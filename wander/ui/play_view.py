"""The Play view: start a game against any policy, play it on the board (or type the policy's turns), see every raw
reply and, at the end, the rubric's scores."""

from __future__ import annotations

from html import escape

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from wander.ui.guard import token_field
from wander.ui.pages import board, fmt, messages, move_buttons, page, table
from wander.ui.play import Game, PlayError, new_game, person_move, typed_turn

router = APIRouter()

# What a form's request may run into that is not the server's fault, each answered with a 400 naming it: a PlayError
# (bad input, an env or policy that cannot be loaded), a ValueError from an env or policy refusing a value, an
# OSError from a tool the env needs and this machine lacks (Stockfish for chess: FileNotFoundError).
REFUSED = (PlayError, ValueError, OSError)


def _state(request: Request):
    return request.app.state.ui


@router.get("/play", response_class=HTMLResponse)
def play_home(request: Request) -> HTMLResponse:
    """The new-game form."""
    return HTMLResponse(page("Play", new_game_form(_state(request)), here="/play"))


def new_game_form(ui, policy: str = "champion", env_name: str | None = None) -> str:
    """The form that starts a game: policy, environment and side."""
    env_name = env_name or ui.run.config.env_name
    try:  # the env's scripted rows and its teacher, when the env loads (a bad name is said when a game starts)
        scripted = [*ui.environment(env_name).reference_policies, "teacher"]
    except REFUSED:
        scripted = []
    names = ["champion", *(name for name, _ in ui.run.lineage()), *scripted]
    options = "".join(f'<option value="{escape(n)}">' for n in names)
    envs = "".join(f'<option value="{escape(n)}">' for n in ui.environment_names())
    return (
        f'<form method="post" action="/play/new" id="new-game">{token_field(ui.csrf)}'
        f'<p><label>Policy <input name="policy" value="{escape(policy)}" list="policies" size="40"></label> '
        "(the registered champion, a lineage name, a model folder of the project, a scripted player or an "
        "OpenAI-compatible URL on this machine)"
        f'<datalist id="policies">{options}</datalist></p>'
        f'<p><label>Environment <input name="env" value="{escape(env_name)}" list="envs" size="20"></label> '
        f'(the run\'s own by default, or a registered one)<datalist id="envs">{envs}</datalist></p>'
        '<p>You play: <label><input type="radio" name="side" value="first" checked> first</label> '
        '<label><input type="radio" name="side" value="second"> second</label> '
        "(board games; in other environments you type the policy's turns or let it play them)</p>"
        '<p><button type="submit" id="start">Start a game</button></p></form>'
    )


@router.post("/play/new", response_model=None)
def play_new(
    request: Request, policy: str = Form("champion"), env: str = Form(""), side: str = Form("first")
) -> HTMLResponse | RedirectResponse:
    """Start a game; a policy or env that cannot be loaded is shown on the form."""
    ui = _state(request)
    try:
        environment = ui.environment(env.strip() or None)
        loaded = ui.policy(policy.strip(), environment)
        game = new_game(ui.games, environment, policy.strip(), loaded, side)
    except REFUSED as exc:
        form = new_game_form(ui, policy, env or None)
        return HTMLResponse(page("Play", form, here="/play", error=str(exc)), status_code=400)
    except RuntimeError as exc:  # the policy's endpoint failed (PolicyRequestError): not the form's fault
        form = new_game_form(ui, policy, env or None)
        return HTMLResponse(
            page("Play", form, here="/play", error=f"the policy failed: {exc}"), status_code=502
        )
    return RedirectResponse(f"/play/{game.id}", status_code=303)


@router.get("/play/{game_id}", response_class=HTMLResponse)
def play_game(request: Request, game_id: str) -> HTMLResponse:
    """A game: its board (or conversation), the policy's raw replies and, once over, the scores."""
    ui = _state(request)
    try:
        game = ui.games.get(game_id)
    except PlayError as exc:
        return HTMLResponse(page("Play", "", here="/play", error=str(exc)), status_code=404)
    return HTMLResponse(game_page(game, ui.csrf))


@router.post("/play/{game_id}/move", response_class=HTMLResponse)
def play_move(request: Request, game_id: str, move: str = Form("")) -> HTMLResponse:
    """The person's move on a board game."""
    return _act(request, game_id, lambda game: person_move(game, move))


@router.post("/play/{game_id}/turn", response_class=HTMLResponse)
def play_turn(
    request: Request, game_id: str, text: str = Form(""), who: str = Form("person")
) -> HTMLResponse:
    """Any env: the person's text as the policy's turn (`who=person`) or the policy's own (`who=policy`)."""
    if who == "person" and not text.strip():
        return _act(request, game_id, lambda game: _refuse("type the turn's text, or let the policy play it"))
    return _act(request, game_id, lambda game: typed_turn(game, None if who == "policy" else text))


def _refuse(message: str) -> None:
    raise PlayError(message)


def _act(request: Request, game_id: str, action) -> HTMLResponse:
    ui = _state(request)
    try:
        game = ui.games.get(game_id)
    except PlayError as exc:
        return HTMLResponse(page("Play", "", here="/play", error=str(exc)), status_code=404)
    try:
        action(game)
    except REFUSED as exc:
        return HTMLResponse(game_page(game, ui.csrf, error=str(exc)), status_code=400)
    except RuntimeError as exc:  # the policy's endpoint failed (PolicyRequestError)
        return HTMLResponse(game_page(game, ui.csrf, error=f"the policy failed: {exc}"), status_code=502)
    return HTMLResponse(game_page(game, ui.csrf))


def game_page(game: Game, token: str, error: str | None = None) -> str:
    """The page of one game; `token` is the server's CSRF token, which its forms carry."""
    title = f"{game.env.name}: you against {game.policy_name}"
    if game.board_game:
        seen, action, hidden = game.position(), f"/play/{game.id}/move", {"csrf": token}
        side = f"<p>You play <b id='person-mark'>{escape(str(game.person_mark))}</b>.</p>"
        left = side + board(seen.squares, seen.square_moves, action, hidden)
        if seen.moves and not seen.square_moves:  # moves no square click names (chess): a button each
            left += f"<p>Your legal moves:</p>{move_buttons(seen.moves, action, hidden)}"
        if not game.done:
            left += (
                f'<form method="post" action="{action}">{token_field(token)}<label>or type '
                f'{escape(seen.move_hint)} <input name="move" size="8" id="move-text"></label> '
                '<button type="submit">Play</button></form>'
            )
    else:
        left = messages(game.episode.messages if game.episode else [])
        if not game.done:
            left += (
                f'<form method="post" action="/play/{game.id}/turn">{token_field(token)}<p><label>The policy\'s turn<br>'
                '<textarea name="text" rows="3" cols="60" id="turn-text"></textarea></label></p>'
                '<p><button name="who" value="person" type="submit">Play this turn</button> '
                f'<button name="who" value="policy" type="submit">Let {escape(game.policy_name)} play it</button>'
                "</p></form>"
            )
    replies = table(
        ["who", "raw reply", "taken as"],
        (
            [
                escape(t.who),
                f"<pre>{escape(t.raw)}</pre>",
                '<span class="valid">move</span>'
                if t.valid
                else '<span class="invalid">invalid reply: the env counted it and asked again</span>',
            ]
            for t in game.turns
        ),
        raw=True,
    )
    right = f"<h2>Replies</h2><div id='replies'>{replies}</div>"
    body = f'<div class="side"><div>{left}</div><div>{right}</div></div>{_result(game)}'
    if game.board_game and game.episode is not None:
        body += f"<details><summary>The conversation the policy played</summary>{messages(game.episode.messages)}</details>"
    body += '<p><a href="/play">New game</a></p>'
    return page(title, body, here="/play", error=error)


def _result(game: Game) -> str:
    if not game.done:
        return ""
    ep = game.episode
    assert ep is not None
    outcome = ep.state.get("outcome")
    headline = (
        f"Game over{f': the policy’s {escape(str(outcome))}' if outcome else ''}. Reward {fmt(ep.reward)}."
    )
    scores = table(["rubric function", "value"], sorted(ep.values.items()))
    return f'<h2 id="game-over">{headline}</h2>{scores}' + (
        f"<p class=notice>{escape(ep.error)}</p>" if ep.error else ""
    )
