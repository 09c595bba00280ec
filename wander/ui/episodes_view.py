"""The Episodes view: the evaluation's games per cell (policy x opponent x side), filtered by any 0/1 rubric value
(losses, invalid moves, ...), each replayed move by move with its rubric values and the policy's worst-case line."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from html import escape

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from wander.ui.pages import fmt, link, messages, page, table
from wander.ui.run_files import RunMissing

router = APIRouter()


def _run(request: Request):
    return request.app.state.ui.run


def flags(episodes: Sequence[dict]) -> list[str]:
    """Rubric values that are 0 or 1 in every game (win, loss, any_invalid, ...): the filters."""
    names: dict[str, bool] = {}
    for ep in episodes:
        for name, value in ep["values"].items():
            names[name] = names.get(name, True) and value in (0, 1, 0.0, 1.0)
    return sorted(name for name, is_flag in names.items() if is_flag)


def cells(episodes: Sequence[dict]) -> dict[tuple[str, str, str], list[dict]]:
    """Games by cell, in the matrix's order."""
    out: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for ep in episodes:
        out[(ep["policy"], ep["opponent"], ep["side"])].append(ep)
    return out


def _missing(exc: RunMissing) -> HTMLResponse:
    return HTMLResponse(page("Episodes", "", here="/episodes", error=str(exc)), status_code=404)


@router.get("/episodes", response_class=HTMLResponse)
def episodes_home(request: Request) -> HTMLResponse:
    """Every cell with its games and the count of each flag, linked to the filtered games."""
    try:
        episodes = _run(request).episodes()
    except RunMissing as exc:
        return _missing(exc)
    names = flags(episodes)
    rows = []
    for (policy, opponent, side), games in cells(episodes).items():
        where = dict(policy=policy, opponent=opponent, side=side)
        counts = [
            link("/episodes/cell", str(n), **where, flag=name)
            if (n := sum(g["values"][name] == 1 for g in games))
            else "0"
            for name in names
        ]
        mean = sum(g["reward"] for g in games) / len(games)
        rows.append(
            [escape(policy), escape(opponent), escape(side), link("/episodes/cell", str(len(games)), **where)]
            + [escape(fmt(mean))]
            + counts
        )
    intro = (
        f"<p>{len(episodes)} games of the evaluation run ({escape(str(_run(request).eval_dir))}). "
        "A count opens the games of that cell where the value is 1.</p>"
    )
    body = intro + table(["policy", "opponent", "side", "games", "mean reward", *names], rows, raw=True)
    return HTMLResponse(page("Episodes", body, here="/episodes"))


def _cell_games(request: Request, policy: str, opponent: str, side: str) -> list[dict]:
    games = cells(_run(request).episodes()).get((policy, opponent, side))
    if not games:
        raise RunMissing(
            f"no cell {policy} x {opponent} ({side}) in the evaluation run; pick one on the Episodes page"
        )
    return games


@router.get("/episodes/cell", response_class=HTMLResponse)
def episodes_cell(
    request: Request, policy: str, opponent: str, side: str, flag: str | None = None
) -> HTMLResponse:
    """A cell's games, optionally only those where `flag` is 1."""
    try:
        games = _cell_games(request, policy, opponent, side)
    except RunMissing as exc:
        return _missing(exc)
    names = flags(games)
    if flag is not None and flag not in names:
        error = f"unknown filter {flag!r}: one of {names}"
        return HTMLResponse(page("Episodes", "", here="/episodes", error=error), status_code=400)
    where = dict(policy=policy, opponent=opponent, side=side)
    filters = " ".join(
        [link("/episodes/cell", "all", **where)] + [link("/episodes/cell", n, **where, flag=n) for n in names]
    )
    rows = [
        [link("/episodes/game", f"game {i}", **where, index=i), escape(fmt(g["reward"]))]
        + [escape(fmt(g["values"].get(n, ""))) for n in names]
        for i, g in enumerate(games)
        if flag is None or g["values"].get(flag) == 1
    ]
    shown = f"{len(rows)} of {len(games)} games" + (f" where {escape(flag)} = 1" if flag else "")
    body = f"<p>Filter: {filters}</p><p id='shown'>{shown}</p>" + table(
        ["game", "reward", *names], rows, raw=True
    )
    return HTMLResponse(page(f"{policy} against {opponent} ({side})", body, here="/episodes"))


@router.get("/episodes/game", response_class=HTMLResponse)
def episodes_game(
    request: Request, policy: str, opponent: str, side: str, index: int, move: int | None = None
) -> HTMLResponse:
    """One game replayed: the conversation up to the policy's `move`-th reply (all of it without `move`)."""
    try:
        games = _cell_games(request, policy, opponent, side)
        if not 0 <= index < len(games):
            raise RunMissing(f"no game {index} in this cell: it has games 0 to {len(games) - 1}")
        worst = (_run(request).matrix().get("worst_case") or {}).get(policy) or {}
    except RunMissing as exc:
        return _missing(exc)
    game = games[index]
    replies = [i for i, m in enumerate(game["messages"]) if m["role"] == "assistant"]
    total = len(replies)
    step = total if move is None else max(0, min(move, total))
    # Up to the step-th reply and the environment's answer to it (the opening messages before any reply).
    end = replies[step] if step < total else len(game["messages"])
    shown = game["messages"][:end]
    where = dict(policy=policy, opponent=opponent, side=side, index=index)
    nav = " ".join(
        [
            link("/episodes/game", "start", **where, move=0),
            link("/episodes/game", "previous", **where, move=max(0, step - 1)),
            link("/episodes/game", "next", **where, move=min(total, step + 1)),
            link("/episodes/game", "end", **where, move=total),
            link("/episodes/cell", "back to the cell", policy=policy, opponent=opponent, side=side),
        ]
    )
    body = f"<p id='step'>After reply {step} of {total}: {nav}</p>" + messages(shown)
    body += "<h2>Rubric</h2>" + table(
        ["function", "value"], [["reward", game["reward"]], *sorted(game["values"].items())]
    )
    if game.get("error"):
        body += f"<p class=notice>error: {escape(game['error'])}</p>"
    if worst:
        lines = [
            [escape(s), escape(str(w.get("outcome"))), escape(" → ".join(map(str, w.get("line") or [])))]
            for s, w in worst.items()
        ]
        body += (
            f"<h2>Worst case of {escape(policy)}</h2><p>The outcome an opponent that knows every move of this "
            "(greedy) policy holds it to, and the exact line to it.</p>"
            + table(["side", "outcome", "line"], lines, raw=True)
        )
    return HTMLResponse(
        page(f"Replay: {policy} against {opponent} ({side}), game {index}", body, here="/episodes")
    )
