"""Server-rendered HTML for `wander ui`: the page shell, tables, conversations, boards and SVG line charts.

Plain HTML and CSS, no script: every view works in any browser and in a headless one, and every value shown is
escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import urlencode

VIEWS = (("/play", "Play"), ("/episodes", "Episodes"), ("/curves", "Curves and lineage"))

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
nav { background: #1d2330; padding: 0.6em 1.2em; }
nav a { color: #dfe6f3; margin-right: 1.5em; text-decoration: none; font-weight: 600; }
nav a.here { color: #ffd166; }
main { padding: 1em 1.5em; max-width: 1200px; }
.error { background: #ffe3e3; border: 1px solid #d33; padding: 0.6em 1em; border-radius: 4px; }
.notice { background: #fff4d6; border: 1px solid #d9a400; padding: 0.6em 1em; border-radius: 4px; }
table { border-collapse: collapse; background: white; }
td, th { border: 1px solid #ccd; padding: 0.25em 0.6em; text-align: left; font-size: 0.92em; }
.board { display: grid; grid-template-columns: repeat(var(--n), 3.2em); gap: 4px; margin: 0.6em 0; }
.board button, .board span { width: 3.2em; height: 3.2em; font-size: 1.4em; font-weight: 700; border: 1px solid #99a;
  background: white; display: flex; align-items: center; justify-content: center; }
.board button { cursor: pointer; color: #99a; font-size: 0.9em; }
.board.fine { grid-template-columns: repeat(var(--n), 2.2em); gap: 0; }
.board.fine span { width: 1.6em; height: 1.6em; font-size: 1.4em; font-weight: 400; border: none; }
.board.fine span.dark { background: #b7c0d8; }
.moves button { font-family: monospace; margin: 1px; }
.side { display: flex; gap: 2em; align-items: flex-start; flex-wrap: wrap; }
.msg { background: white; border: 1px solid #dde; border-radius: 4px; margin: 0.3em 0; padding: 0.3em 0.6em; }
.msg.assistant { border-left: 4px solid #3a7bd5; } .msg.user { border-left: 4px solid #999; }
.msg.system { border-left: 4px solid #bbb; color: #666; }
pre { white-space: pre-wrap; margin: 0.2em 0; font-size: 0.9em; }
.invalid { color: #c00; font-weight: 700; } .valid { color: #080; }
.charts { display: flex; flex-wrap: wrap; gap: 0.8em; }
.chain { display: flex; flex-wrap: wrap; align-items: center; gap: 0.4em; }
.node { background: white; border: 1px solid #99a; border-radius: 6px; padding: 0.4em 0.7em; font-size: 0.9em; }
.node.registered { border: 2px solid #d9a400; }
"""


def page(title: str, body: str, here: str = "", error: str | None = None) -> str:
    """A whole page: the views' navigation, an error box when `error`, then `body` (already HTML)."""
    nav = "".join(
        f'<a href="{path}"{" class=here" if path == here else ""}>{escape(label)}</a>'
        for path, label in VIEWS
    )
    box = f'<p class="error" role="alert">{escape(error)}</p>' if error else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)} - wander</title>"
        f"<style>{STYLE}</style></head><body><nav>{nav}</nav><main><h1>{escape(title)}</h1>{box}{body}"
        "</main></body></html>"
    )


def link(path: str, text: str, **query: object) -> str:
    """An anchor to `path` with a query string."""
    url = f"{path}?{urlencode({k: v for k, v in query.items() if v is not None})}" if query else path
    return f'<a href="{escape(url)}">{escape(text)}</a>'


def table(header: Sequence[str], rows: Iterable[Sequence[object]], raw: bool = False) -> str:
    """A table; cells are escaped unless `raw` (cells already HTML)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell if raw else escape(fmt(cell))}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def fmt(value: object) -> str:
    """A value as the pages show it: floats to 3 decimals."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def messages(conversation: Sequence[dict]) -> str:
    """A conversation, one box per message."""
    return "".join(
        f'<div class="msg {escape(str(m.get("role", "")))}"><b>{escape(str(m.get("role", "")))}</b>'
        f"<pre>{escape(str(m.get('content', '')))}</pre></div>"
        for m in conversation
    )


def board(
    squares: Sequence[str],
    clickable: dict[int, str] | None = None,
    action: str = "",
    hidden: dict | None = None,
) -> str:
    """A square board from its squares row by row ('' empty); each square in `clickable` is a button posting its
    move as `move`. Boards wider than 3 are drawn small and checkered (chess)."""
    n = max(1, math.isqrt(len(squares)))
    clickable = clickable or {}
    fine = n > 3
    squares_html = []
    for i, label in enumerate(squares):
        if i in clickable:
            move = escape(clickable[i])
            squares_html.append(
                f'<button name="move" value="{move}" aria-label="cell {i}" data-cell="{i}">{move}</button>'
            )
        else:
            dark = ' class="dark"' if fine and (i // n + i % n) % 2 else ""
            squares_html.append(f'<span data-cell="{i}"{dark}>{escape(label)}</span>')
    grid = f'<div class="board{" fine" if fine else ""}" style="--n:{n}">{"".join(squares_html)}</div>'
    return (
        f'<form method="post" action="{escape(action)}">{_fields(hidden)}{grid}</form>' if clickable else grid
    )


def move_buttons(moves: Sequence[str], action: str, hidden: dict | None = None) -> str:
    """One button per move, each posting it as `move`."""
    buttons = "".join(
        f'<button name="move" value="{escape(m)}" data-move="{escape(m)}">{escape(m)}</button>' for m in moves
    )
    return f'<form method="post" action="{escape(action)}" class="moves">{_fields(hidden)}{buttons}</form>'


def _fields(hidden: dict | None) -> str:
    return "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(str(v))}">'
        for k, v in (hidden or {}).items()
    )


def line_chart(title: str, points: Sequence[tuple[float, float]], width: int = 300, height: int = 150) -> str:
    """An SVG line chart of (x, y) points with its title and the axes' ranges."""
    finite = [(x, y) for x, y in points if math.isfinite(y)]
    if not finite:
        return ""
    xs, ys = [x for x, _ in finite], [y for _, y in finite]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    pad = 28

    def sx(x: float) -> float:
        return pad + (x - x0) / ((x1 - x0) or 1) * (width - 2 * pad)

    def sy(y: float) -> float:
        return height - pad - (y - y0) / ((y1 - y0) or 1) * (height - 2 * pad)

    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in finite)
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="{escape(title)}" '
        f'style="background:white;border:1px solid #dde">'
        f'<text x="{pad}" y="14" font-size="12" font-weight="600">{escape(title)}</text>'
        f'<polyline fill="none" stroke="#3a7bd5" stroke-width="2" points="{path}"/>'
        f'<text x="2" y="{sy(y1) + 4:.0f}" font-size="10">{fmt(float(y1))}</text>'
        f'<text x="2" y="{sy(y0) + 4:.0f}" font-size="10">{fmt(float(y0))}</text>'
        f'<text x="{pad}" y="{height - 6}" font-size="10">step {x0:g}</text>'
        f'<text x="{width - pad - 40}" y="{height - 6}" font-size="10">step {x1:g}</text></svg>'
    )
