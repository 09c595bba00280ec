"""The Curves and lineage view: base -> SFT -> GRPO stages -> registered version, each stage's headline metrics,
and the learning curves every stage run logged to MLflow. The lineage and metrics are the run's files
(`wander.ui.run_files`); the registry and the curves come through the tracking store (`wander.ui.tracking_store`),
and without one (or when it does not answer) their panels say so in one line."""

from __future__ import annotations

import os
from html import escape

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from wander.ui.pages import fmt, line_chart, page, table
from wander.ui.tracking_store import NO_STORE, RunStore, StageCurves, TrackingStoreError, Version

router = APIRouter()

# A lineage entry's headline metrics file, when it is not named after the entry (the base model's stage).
METRICS_OF = {"base": "build_model"}


@router.get("/curves", response_class=HTMLResponse)
def curves(request: Request) -> HTMLResponse:
    """The lineage chain, the registry's versions and every stage's curves."""
    run = request.app.state.ui.run
    lineage, metrics = run.lineage(), run.stage_metrics()
    versions, stage_curves, unread = tracked(request.app.state.ui.store, run.config.model_name)
    if not lineage and not versions and not metrics and not stage_curves:
        error = f"no pipeline run in {run.root}: no lineage, metrics, registered version or curves; "
        error += f"run `make run` first ({unread})" if unread else "run `make run` first"
        return HTMLResponse(page("Curves and lineage", "", here="/curves", error=error), status_code=404)
    registered = {v.tags.get("wander.checkpoint"): v for v in versions}
    nodes = []
    for name, folder in lineage:
        headline = metrics.get(METRICS_OF.get(name, name), {})
        shown = ", ".join(f"{k} {fmt(v)}" for k, v in list(headline.items())[:4])
        missing = "" if folder.is_dir() else " <i>(missing)</i>"
        version = registered.get(os.path.relpath(folder, run.root))
        mark = " class='node registered'" if version else " class=node"
        tag = ""
        if version:
            aliases = f" @{', @'.join(version.aliases)}" if version.aliases else ""
            tag = f"<br><b>{escape(version.model)} v{version.version}{escape(aliases)}</b>"
        nodes.append(
            f"<div{mark} data-stage='{escape(name)}'><b>{escape(name)}</b>{missing}<br>{escape(shown)}{tag}</div>"
        )
    chain = (
        f"<div class='chain' id='lineage'>{' → '.join(nodes)}</div>"
        if nodes
        else "<p>No lineage given (params.yaml's <code>register.lineage</code>).</p>"
    )
    rows = [
        [
            v.version,
            ", ".join(v.aliases) or "-",
            v.tags.get("wander.checkpoint", "?"),
            v.tags.get("wander.parent", "?"),
            v.tags.get("wander.promoted", "?"),
            v.tags.get("wander.promotion_reason", ""),
            ", ".join(f"{k[5:]} {val}" for k, val in v.tags.items() if k.startswith("eval.")),
        ]
        for v in versions
    ]
    # Without a store (or with one that did not answer), both of its panels say why in one line.
    said = f"<p class='no-store'>{escape(unread[:1].upper() + unread[1:])}.</p>" if unread else ""
    header = ["version", "aliases", "checkpoint", "parent", "promoted", "reason", "evaluation"]
    where = "" if unread else request.app.state.ui.store.location
    registry = table(header, rows) if rows else said or f"<p>No registered version in {escape(where)}.</p>"
    charts = "".join(
        f"<h3>{escape(stage.stage)}</h3><div class='charts'>"
        + "".join(line_chart(key, points) for key, points in stage.series.items())
        + "</div>"
        for stage in stage_curves
    )
    charts = charts or said or f"<p>No per-step metrics in {escape(where)}.</p>"
    model = run.config.model_name or "the run's model (none named)"
    body = (
        f"<h2>Lineage</h2>{chain}<h2>Registered versions of {escape(model)}</h2>{registry}"
        f"<h2>Learning curves</h2><div id='curves'>{charts}</div>"
    )
    return HTMLResponse(page("Curves and lineage", body, here="/curves"))


def tracked(store: RunStore | None, model: str | None) -> tuple[list[Version], list[StageCurves], str | None]:
    """The registry's versions of `model` and the stages' curves, and why they could not be read (None: they were)."""
    if store is None:
        return [], [], NO_STORE
    try:
        return (store.versions(model) if model else []), store.curves(), None
    # A server that does not answer: said on the page, and the run's files are still shown.
    except TrackingStoreError as exc:
        return [], [], str(exc)
