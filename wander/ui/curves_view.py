"""The Curves and lineage view: base -> SFT -> GRPO stages -> registered version, each stage's headline metrics,
and the learning curves every stage run logged to MLflow, all read in place (`wander.ui.run_files`)."""

from __future__ import annotations

import os
from html import escape

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from wander.ui.pages import fmt, line_chart, page, table

router = APIRouter()

# A lineage entry's headline metrics file, when it is not named after the entry (the base model's stage).
METRICS_OF = {"base": "build_model"}


@router.get("/curves", response_class=HTMLResponse)
def curves(request: Request) -> HTMLResponse:
    """The lineage chain, the registry's versions and every stage's curves."""
    run = request.app.state.ui.run
    lineage, versions, metrics = run.lineage(), run.versions(), run.stage_metrics()
    stage_curves = run.curves()
    if not lineage and not versions and not metrics and not stage_curves:
        error = f"no pipeline run in {run.root}: no lineage, metrics or MLflow store; run `make run` first"
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
    registry = (
        table(["version", "aliases", "checkpoint", "parent", "promoted", "reason", "evaluation"], rows)
        if rows
        else "<p>No registered version in the MLflow store (mlflow/mlflow.db).</p>"
    )
    charts = "".join(
        f"<h3>{escape(stage.stage)}</h3><div class='charts'>"
        + "".join(line_chart(key, points) for key, points in stage.series.items())
        + "</div>"
        for stage in stage_curves
    )
    model = run.config.model_name or "the run's model (none named)"
    body = (
        f"<h2>Lineage</h2>{chain}<h2>Registered versions of {escape(model)}</h2>{registry}"
        f"<h2>Learning curves</h2><div id='curves'>{charts or '<p>No per-step metrics in the MLflow store.</p>'}</div>"
    )
    return HTMLResponse(page("Curves and lineage", body, here="/curves"))
