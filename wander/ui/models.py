"""Which models the Play form may load, and where an API key may go.

A page of the UI is a form anyone's browser can be made to fill, so a model spec is never taken as-is: it must be
the registry's `champion`, a lineage name, one of the env's scripted players, a folder under the project root that
holds a model, or an OpenAI-compatible URL on loopback. A URL on another machine needs `wander ui
--allow-remote-models`; hub ids (which would download) and paths outside the project are refused.

The user's API key (`OPENAI_API_KEY`) goes to no model URL unless its endpoint was named with `wander ui
--api-key-endpoint URL`: a typed URL receives the placeholder key local servers accept, never the user's.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from wander.ui.guard import is_loopback

API_KEY_ENV = "OPENAI_API_KEY"
SCRIPTED_HINT = "a scripted player (minimax, random, teacher, expert-0.25)"


class ModelRefused(ValueError):
    """A model spec the UI will not load: the message says why and how to allow it."""


@dataclass(frozen=True)
class Resolved:
    """What a spec names: a URL (`url`, the key's variable or '' for none) or a local folder (`folder`)."""

    spec: str
    url: str | None = None
    api_key_env: str = ""
    folder: Path | None = None


def origin_of(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL, the port filled in: what decides where a request goes."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ModelRefused(f"model URL {url!r} holds spaces or control characters")
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError as exc:  # an unclosed [IPv6 bracket
        raise ModelRefused(f"model URL {url!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise ModelRefused(f"{url!r} is not an http:// or https:// URL with a host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ModelRefused(f"{url!r} has a port that is not a number") from None
    host = hostname.lower()
    try:
        host = str(ipaddress.ip_address(host))  # one spelling per address: ::1 and 0:0::1 are one host
    except ValueError:
        pass
    return parts.scheme, host, port


@dataclass
class ModelAccess:
    """The user's choices at `wander ui` start: remote URLs allowed or not, the endpoints the API key may go to."""

    root: Path
    allow_remote: bool = False
    key_endpoints: Iterable[str] = ()
    _key_origins: set[tuple[str, str, int]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        for url in self.key_endpoints:
            try:
                self._key_origins.add(origin_of(url))
            except ModelRefused as exc:
                raise ValueError(
                    f"--api-key-endpoint: {exc}; give the endpoint's URL, e.g. https://api.openai.com/v1"
                ) from None

    def url(self, spec: str) -> Resolved:
        """A model URL if allowed: loopback always, another host only with `allow_remote`; the key only if named."""
        origin = origin_of(spec)
        if not is_loopback(origin[1]) and not self.allow_remote:
            raise ModelRefused(
                f"model URL {spec!r} is not on this machine (loopback): the UI loads remote models only when "
                "started with `wander ui --allow-remote-models`"
            )
        # The key's variable only for an endpoint the user named for it; '' sends the placeholder key.
        key_env = API_KEY_ENV if origin in self._key_origins else ""
        return Resolved(spec, url=spec, api_key_env=key_env)

    def folder(self, spec: str) -> Resolved:
        """A model folder under the project root (relative to it, or absolute inside it) that holds a model."""
        if "\x00" in spec:
            raise ModelRefused("a model folder's name cannot hold a NUL character")
        # Lexical, not resolved: `..` cannot climb out, while links the user made inside the project are theirs.
        path = Path(os.path.normpath(self.root / spec))
        if path != self.root and self.root not in path.parents:
            raise ModelRefused(
                f"{spec!r} is outside the project {self.root}: the UI loads model folders under the project only "
                "(copy or link the model into it)"
            )
        try:
            holds_model = (path / "config.json").is_file()
        except OSError as exc:  # a name too long for the file system
            raise ModelRefused(f"model folder {spec!r}: {exc.strerror}") from None
        if not holds_model:
            raise ModelRefused(
                f"{spec!r} is not a model folder under the project (no {spec.rstrip('/')}/config.json): name "
                f"`champion`, a lineage name, a model folder, {SCRIPTED_HINT} or a URL on this machine"
            )
        return Resolved(spec, folder=path)

    def resolve(self, spec: str) -> Resolved:
        """A typed spec that is not a lineage name or a scripted player: a URL or a project folder."""
        if spec.startswith(("http://", "https://")):  # as make_policy tells a URL (lower case)
            return self.url(spec)
        return self.folder(spec)
