"""The summary cards page (seed 003's UI): ``/`` and its script, no build step, no CDN.

The HTML and JS are files next to this module (``static/``), served as they are. They hold no
data: the page asks for the token once, keeps it in ``sessionStorage`` and sends it in
``X-Compactor-Token`` with every call to the API, which is where the data is.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import Response

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

_TYPES = {"page.js": "text/javascript; charset=utf-8", "page.css": "text/css; charset=utf-8"}
#: The page may run only its own script and talk only to this server.
_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'"


def _static(name: str) -> bytes:
    return resources.files("context_compactor.server").joinpath("static", name).read_bytes()


@router.get("/")
def index(request: Request) -> Response:
    headers = {"content-security-policy": _CSP, "x-frame-options": "DENY", "cache-control": "no-store"}
    html = _static("page.html")
    if request.app.state.settings.no_auth:
        html = html.replace(b'data-auth="token"', b'data-auth="none"', 1)
    return Response(html, media_type="text/html; charset=utf-8", headers=headers)


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in _TYPES:
        return Response(status_code=404)
    return Response(_static(name), media_type=_TYPES[name], headers={"cache-control": "no-store"})


@router.get("/favicon.ico")
def favicon() -> Response:
    return Response(status_code=204)
