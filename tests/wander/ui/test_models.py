"""What the Play form may load: a remote model URL is refused with how to allow it; paths outside the project and hub
ids are refused; the env field takes registered environments only; the user's API key reaches a model URL only when
its endpoint was named for it (a loopback server records every header it got)."""

from __future__ import annotations

import html
import os

import pytest

from wander.core.policy import Reply
from wander.core.registry import environment_names
from wander.policies.openai_server import create_app as model_app
from wander.policies.openai_server import serve_in_thread
from wander.ui.app import create_app

from .conftest import post_form

SECRET = "sk-test-0123456789abcdefghijklmnopqrstuv"  # a key-shaped value that must not leave this process


def error(response) -> str:
    """The reason the page gives."""
    return html.unescape(response.text.split('role="alert">')[1].split("</p>")[0])


@pytest.fixture(scope="module")
def ui_url(run_config):
    """The tiny run's UI, with the defaults: loopback models only, the key to no model URL."""
    with serve_in_thread(create_app(run_config), api_path="", probe_path="/play", startup_timeout=60) as url:
        yield url


def test_models_the_user_did_not_allow_are_refused_with_the_way_to_allow_them(ui_url, run_root):
    outside = os.path.dirname(run_root)
    cases = {
        "http://203.0.113.7/v1": "wander ui --allow-remote-models",
        "https://api.openai.com/v1": "wander ui --allow-remote-models",
        "http://127.0.0.1.evil.example/v1": "wander ui --allow-remote-models",
        "http://127.0.0.1@evil.example/v1": "wander ui --allow-remote-models",
        "http://127.0.0.1:80 /v1": "spaces or control characters",
        f"{outside}": "is outside the project",
        "/etc": "is outside the project",
        "../../..": "is outside the project",
        "data/../../elsewhere": "is outside the project",
        "openai-community/gpt2": "is not a model folder under the project",  # a hub id: no download
        "data/eval": "is not a model folder under the project",
        "HTTP://127.0.0.1/v1": "is not a model folder under the project",
    }
    for spec, reason in cases.items():
        response = post_form(ui_url, "/play/new", {"policy": spec, "side": "first"})
        assert response.status_code == 400 and reason in error(response), (spec, response.text[-300:])
    # What the user allowed loads: a lineage name, a folder of the project, a scripted player.
    for spec in ("base", "data/models/base", str(run_root / "data/models/base"), "random", "teacher"):
        response = post_form(ui_url, "/play/new", {"policy": spec, "side": "first"}, follow_redirects=False)
        assert response.status_code == 303, (spec, response.text[-300:])


def test_the_env_field_takes_registered_environments_only(ui_url):
    names = environment_names()
    for env in (
        "os",
        "wander.core.registry",
        "openenv:http://127.0.0.1:9/",
        "envs.tictactoe",
        "../tictactoe",
    ):
        response = post_form(ui_url, "/play/new", {"policy": "random", "env": env})
        assert response.status_code == 400, (env, response.status_code)
        assert f"unknown environment {env!r}" in error(response) and ", ".join(names) in error(response)
    response = post_form(
        ui_url, "/play/new", {"policy": "teacher", "env": "reverse_text"}, follow_redirects=False
    )
    assert response.status_code == 303


class Says:
    """A policy that always gives the same reply."""

    def __init__(self, text: str):
        self.text = text

    def __call__(self, conversations):
        return [Reply(self.text) for _ in conversations]


@pytest.fixture()
def recorder():
    """(url, requests) of an OpenAI-compatible server on loopback that records the headers and body of every
    request it gets."""
    requests: list[dict] = []
    app = model_app(lambda seed: Says("<move>4</move>"), "recorded")

    async def recording(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        body = b""

        async def keep() -> dict:
            nonlocal body
            message = await receive()
            body += message.get("body", b"")
            return message

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        requests.append({"path": scope["path"], "headers": headers})
        await app(scope, keep, send)
        requests[-1]["body"] = body.decode("utf-8", "replace")

    with serve_in_thread(recording) as url:
        yield url, requests


def test_the_api_key_goes_only_to_the_endpoint_named_for_it(run_config, recorder, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    model_url, requests = recorder
    port = model_url.rsplit(":", 1)[1].split("/")[0]
    # (remote models allowed?, endpoints named for the key, whether the recorder may get the key)
    setups = [
        (True, [], False),  # remote allowed: the model is played, the key is not sent
        (False, ["http://127.0.0.1:1/v1", "https://api.openai.com/v1", f"https://127.0.0.1:{port}"], False),
        (False, [model_url.removesuffix("/v1")], True),  # its endpoint named: the key goes to it
    ]
    for allow_remote, endpoints, gets_key in setups:
        requests.clear()
        app = create_app(run_config, allow_remote_models=allow_remote, api_key_endpoints=endpoints)
        with serve_in_thread(app, api_path="", probe_path="/play", startup_timeout=60) as url:
            form = {"policy": model_url, "side": "second"}
            response = post_form(url, "/play/new", form, follow_redirects=False)
        assert response.status_code == 303, response.text[-300:]
        # The policy moved first, so the recorder was asked; every request it got carries the key or none of it.
        assert any(r["path"] == "/v1/chat/completions" for r in requests), endpoints
        for request in requests:
            expected = f"Bearer {SECRET}" if gets_key else "Bearer EMPTY"  # EMPTY: what local servers accept
            assert request["headers"]["authorization"] == expected, (endpoints, request["path"])
            assert gets_key or SECRET not in str(request), (endpoints, request["path"])


def test_the_cli_flags_reach_the_app(run_config):
    from wander.cli import build_parser

    args = build_parser().parse_args(
        [
            "ui",
            "--allow-remote-models",
            "--api-key-endpoint",
            "https://api.openai.com/v1",
            "--api-key-endpoint",
            "http://127.0.0.1:8000",
        ]
    )
    assert args.allow_remote_models and args.api_key_endpoint == [
        "https://api.openai.com/v1",
        "http://127.0.0.1:8000",
    ]
    defaults = build_parser().parse_args(["ui"])
    assert not defaults.allow_remote_models and defaults.api_key_endpoint == []
    with pytest.raises(
        ValueError, match="--api-key-endpoint: 'api.openai.com' is not an http:// or https:// URL"
    ):
        create_app(run_config, api_key_endpoints=["api.openai.com"])


def test_wander_ui_describes_a_plain_folder_by_its_options(capsys):
    from wander.cli import build_parser
    from wander.eval.config import EvaluateConfig

    args = build_parser().parse_args(
        [
            "ui",
            "--env",
            "reverse_text",
            "--lineage",
            "base=m/base",
            "--lineage",
            "sft=m/sft",
            "--model-name",
            "x",
        ]
    )
    assert (args.env, args.lineage, args.model_name) == (
        "reverse_text",
        [("base", "m/base"), ("sft", "m/sft")],
        "x",
    )
    # Without them: the library's own defaults (no params file is read), the evaluation in `EvaluateConfig.out_dir`.
    defaults = build_parser().parse_args(["ui"])
    assert defaults.eval_dir == EvaluateConfig.model_fields["out_dir"].default
    assert (defaults.lineage, defaults.model_name, defaults.metrics_dir) == ([], None, None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["ui", "--lineage", "base"])
    assert "'base' is not NAME=FOLDER" in capsys.readouterr().err
