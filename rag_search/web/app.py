"""The search page as a Starlette app: routes, templates, static files, and the headers every answer carries.

Routes: `/` (the search form, with results when there is a q: a GET form, so it works without JavaScript and any
results page is a bookmark), `/results` (the same results as a fragment, for search-as-you-type), `/item/{id}`
(a whole item), `/status` and `POST /index` (the status view and "index now"), `/login` and `POST /logout`.
Security comes from the Gate (security.py) given by the server that mounts the app.
"""

from __future__ import annotations

import ipaddress
import time
from functools import wraps
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from rag_search.access.http_keys import Refusal, client_address
from rag_search.errors import NotFound, QueryError
from rag_search.retrieval.engine import MODES
from rag_search.web import documents, related, searching, status
from rag_search.web.backend import Backend
from rag_search.web.facets import options
from rag_search.web.security import COOKIE, Csrf, Gate, Principal, cookie_args, safe_next

HERE = Path(__file__).parent
HEADERS = {  # nothing is loaded from elsewhere, no inline script runs, no other site may frame the page
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    # same-origin: never sent to other sites, and the page's own form posts carry its Origin (with no-referrer,
    # Chromium sends `Origin: null`, which the server's Origin check cannot tell from another site's sandboxed page)
    "x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
}
EXPIRED_FORM = "This form has expired (the server restarted, or you signed in again elsewhere): reload the page " \
               "and press the button again."


def web_app(backend: Backend, gate: Gate, dagster_ui: str | None = None, index_run=None,
            record=None) -> SecurityHeaders:
    """The page over an open index. dagster_ui: where people's browsers reach the Dagster UI (default: the server's
    server.dagster_url, else the local UI for browsers on this machine only). index_run(collection) -> counts: what
    "index now" calls (default rag_index's). record(user, tool, arguments, answer, started): the query log's."""
    pages = Pages(backend, gate, dagster_ui, status.IndexJobs(index_run or status.mcp_index_run(backend)), record)
    routes = [
        Route("/", pages.home), Route("/results", pages.results), Route("/item/{item_id:int}", pages.item),
        Route("/status", pages.status_view), Route("/index", pages.index_now, methods=["POST"]),
        Route("/login", pages.login, methods=["GET", "POST"]), Route("/logout", pages.logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes)
    app.state.jobs = pages.jobs
    return SecurityHeaders(app)


def signed_in(handler):
    """Handlers get the principal; without one, pages go to the login page (fragments and posts get 401)."""
    @wraps(handler)
    async def wrapped(self: Pages, request: Request) -> Response:
        principal = self.gate.authorize(request)
        if principal is None:
            if request.method == "GET" and request.url.path != "/results":
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
            return self.error(request, None, 401, "You are signed out (or your sign-in ended): sign in again.",
                              link=("/login", "Sign in"))
        return await handler(self, request, principal)
    return wrapped


class Pages:
    """The route handlers over one backend, gate and set of "index now" jobs."""

    def __init__(self, backend: Backend, gate: Gate, dagster_ui: str | None, jobs: status.IndexJobs, record=None):
        self.backend, self.gate, self.dagster_ui, self.jobs, self.record = backend, gate, dagster_ui, jobs, record
        self.templates, self.csrf = Jinja2Templates(directory=str(HERE / "templates")), Csrf()

    def page(self, request: Request, name: str, principal: Principal | None, code: int = 200, **values) -> Response:
        values |= {"principal": principal, "csrf": self.csrf.token(principal) if principal else "",
                   "sign_out": bool(self.gate.login_fields)}
        return self.templates.TemplateResponse(request, name, values, status_code=code)

    def error(self, request: Request, principal: Principal | None, code: int, message: str,
              link: tuple[str, str] = ("/", "Back to search"), headers: dict | None = None) -> Response:
        """A page that says what went wrong and what to do (never a bare status or JSON)."""
        response = self.page(request, "error.html", principal, code, message=message, link=link,
                             title={401: "Sign in", 403: "Refused", 404: "Not found", 429: "Wait"}.get(code, "Error"))
        response.headers.update(headers or {})
        return response

    @signed_in
    async def home(self, request: Request, principal: Principal) -> Response:
        allowed = self.gate.collections_for(principal)
        answer = await self._search(request, principal, allowed)
        facets = await _thread(options, self.backend, allowed)
        return self.page(request, "search.html", principal, 400 if answer.error else 200, answer=answer,
                         options=facets, modes=MODES)

    @signed_in
    async def results(self, request: Request, principal: Principal) -> Response:
        answer = await self._search(request, principal, self.gate.collections_for(principal))
        return self.page(request, "_results.html", principal, 400 if answer.error else 200, answer=answer)

    async def _search(self, request: Request, principal: Principal, allowed) -> searching.Answer:
        """The search of the query string, recorded in the query log as an MCP search is (tool "page")."""
        started = time.perf_counter()
        answer = await _search(self.backend, request, allowed)
        if self.record is not None and answer.query.q:
            q = answer.query
            arguments = {"query": q.q, "mode": q.mode, "collections": list(q.collections), "types": list(q.types),
                         "after": q.after or None, "before": q.before or None, "tags": list(q.tags),
                         "people": list(q.people)}
            shown = {"hits": [{"key": h["key"]} for h in answer.hits + answer.weaker]}
            await _thread(self.record, principal.name, "page", arguments, shown, started, answer.error)
        return answer

    @signed_in
    async def item(self, request: Request, principal: Principal) -> Response:
        allowed, item_id = self.gate.collections_for(principal), request.path_params["item_id"]
        chunk, q = _int(request.query_params.get("chunk")), request.query_params.get("q", "")
        try:
            view = await _thread(documents.open_item, self.backend, item_id, chunk, q, allowed,
                                 _int(request.query_params.get("part")))
        except NotFound as exc:
            return self.error(request, principal, 404, str(exc))
        near = await _thread(related.related, self.backend, item_id, allowed)
        return self.page(request, "item.html", principal, item=view, related=near)

    @signed_in
    async def status_view(self, request: Request, principal: Principal) -> Response:
        view = await _thread(status.status, self.backend, self.gate.collections_for(principal),
                             self._dagster_ui(request))
        names = {c["name"] for c in view["collections"]}
        jobs = {n: j for n, j in self.jobs.all().items() if n in names}
        return self.page(request, "status.html", principal, view=view, jobs=jobs,
                         refresh=any(j.running for j in jobs.values()))

    @signed_in
    async def index_now(self, request: Request, principal: Principal) -> Response:
        form = await request.form()
        name, allowed = str(form.get("collection", "")), self.gate.collections_for(principal)
        if not self.csrf.ok(principal, str(form.get("csrf", ""))):
            return self.error(request, principal, 403, EXPIRED_FORM, link=("/status", "Back to the status page"))
        if allowed is not None and name not in allowed:
            return self.error(request, principal, 404, f"No collection named '{name[:80]}' among yours.",
                              link=("/status", "Back to the status page"))
        self.jobs.start(name)
        return RedirectResponse("/status", status_code=303)

    def _dagster_ui(self, request: Request) -> str | None:
        """Where this visitor's browser reaches the Dagster UI: the configured public address, else the local UI
        for a browser on this machine; None (runs shown without links) for anyone else."""
        settings = self.backend.settings
        public = self.dagster_ui or (settings.server.dagster_url if settings is not None else None)
        return public or (status.DAGSTER_UI if _loopback(client_address(request.scope)) else None)

    async def login(self, request: Request) -> Response:
        target = safe_next(request.query_params.get("next"))
        if not self.gate.login_fields or self.gate.authorize(request) is not None:
            return RedirectResponse(target, status_code=303)
        if request.method == "GET":
            return self.page(request, "login.html", None, fields=self.gate.login_fields, next=target)
        form = await request.form()
        fields = {k: str(v) for k, v in form.items() if k in self.gate.login_fields}
        value = await _thread(self.gate.sign_in, fields, client_address(request.scope))
        target = safe_next(str(form.get("next", "")))
        if isinstance(value, Refusal):
            wait = {"retry-after": str(value.retry_after)} if value.retry_after else {}
            response = self.page(request, "login.html", None, value.status, fields=self.gate.login_fields,
                                 next=target, message=value.message)
            response.headers.update(wait)
            return response
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(**cookie_args(request, value))
        return response

    @signed_in
    async def logout(self, request: Request, principal: Principal) -> Response:
        form = await request.form()
        if not self.csrf.ok(principal, str(form.get("csrf", ""))):
            return self.error(request, principal, 403, EXPIRED_FORM.replace("press the button", "sign out"))
        await _thread(self.gate.sign_out, principal)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response


async def _search(backend: Backend, request: Request, allowed) -> searching.Answer:
    try:
        query = searching.Query.from_params(request.query_params)
    except QueryError as exc:
        return searching.Answer(searching.Query(q=request.query_params.get("q", "")), error=str(exc))
    return await _thread(searching.search, backend, query, allowed)


async def _thread(fn, *args):
    """Library calls (SQLite, the embedder) off the event loop."""
    import anyio

    return await anyio.to_thread.run_sync(lambda: fn(*args))


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class SecurityHeaders:
    """ASGI middleware: HEADERS on every answer, and pages (private data) never cached."""

    def __init__(self, app):
        self.app = app

    def __getattr__(self, name):  # app.state and friends stay reachable
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        static = scope.get("path", "").startswith("/static/")

        async def with_headers(message):
            if message["type"] == "http.response.start":
                extra = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
                if not static:
                    extra.append((b"cache-control", b"no-store"))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)
