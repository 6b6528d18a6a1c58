"""The search page as a Starlette app: routes, templates, static files, and the headers every answer carries.

Routes: `/` (the search form, with results when there is a q: a GET form, so it works without JavaScript and any
results page is a bookmark), `/results` (the same results as a fragment, for search-as-you-type), `/item/{id}`
(a whole item), `/status` and `POST /index` (the status view and "index now"), `/login` and `POST /logout`.
Security comes from the Gate (security.py) given by the server that mounts the app.
"""

from __future__ import annotations

from functools import wraps
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

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
    "x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
}


WRONG_SIGN_IN = {("token",): "That is not the token this server was started with. Check it and try again.",
                 ("key",): "That is not a key of this server. Check it, or ask the server's owner for a new one "
                           "(`local-rag users key NAME`)."}


def web_app(backend: Backend, gate: Gate, dagster_ui: str = status.DAGSTER_UI, index_run=None) -> SecurityHeaders:
    """The page over an open index. index_run(collection) -> counts: what "index now" calls (default rag_index's)."""
    pages = Pages(backend, gate, dagster_ui, status.IndexJobs(index_run or status.mcp_index_run(backend)))
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
            return Response("Sign in first: open the page again.", status_code=401)
        return await handler(self, request, principal)
    return wrapped


class Pages:
    """The route handlers over one backend, gate and set of "index now" jobs."""

    def __init__(self, backend: Backend, gate: Gate, dagster_ui: str, jobs: status.IndexJobs):
        self.backend, self.gate, self.dagster_ui, self.jobs = backend, gate, dagster_ui, jobs
        self.templates, self.csrf = Jinja2Templates(directory=str(HERE / "templates")), Csrf()

    def page(self, request: Request, name: str, principal: Principal | None, code: int = 200, **values) -> Response:
        values |= {"principal": principal, "csrf": self.csrf.token(principal) if principal else "",
                   "sign_out": bool(self.gate.login_fields)}
        return self.templates.TemplateResponse(request, name, values, status_code=code)

    @signed_in
    async def home(self, request: Request, principal: Principal) -> Response:
        allowed = self.gate.collections_for(principal)
        answer = await _search(self.backend, request, allowed)
        facets = await _thread(options, self.backend, allowed)
        return self.page(request, "search.html", principal, 400 if answer.error else 200, answer=answer,
                         options=facets, modes=MODES)

    @signed_in
    async def results(self, request: Request, principal: Principal) -> Response:
        answer = await _search(self.backend, request, self.gate.collections_for(principal))
        return self.page(request, "_results.html", principal, 400 if answer.error else 200, answer=answer)

    @signed_in
    async def item(self, request: Request, principal: Principal) -> Response:
        allowed, item_id = self.gate.collections_for(principal), request.path_params["item_id"]
        chunk, q = _int(request.query_params.get("chunk")), request.query_params.get("q", "")
        try:
            view = await _thread(documents.open_item, self.backend, item_id, chunk, q, allowed,
                                 _int(request.query_params.get("part")))
        except NotFound as exc:
            return self.page(request, "error.html", principal, 404, message=str(exc))
        near = await _thread(related.related, self.backend, item_id, allowed)
        return self.page(request, "item.html", principal, item=view, related=near)

    @signed_in
    async def status_view(self, request: Request, principal: Principal) -> Response:
        view = await _thread(status.status, self.backend, self.gate.collections_for(principal), self.dagster_ui)
        names = {c["name"] for c in view["collections"]}
        jobs = {n: j for n, j in self.jobs.all().items() if n in names}
        return self.page(request, "status.html", principal, view=view, jobs=jobs,
                         refresh=any(j.running for j in jobs.values()))

    @signed_in
    async def index_now(self, request: Request, principal: Principal) -> Response:
        form = await request.form()
        name, allowed = str(form.get("collection", "")), self.gate.collections_for(principal)
        if not self.csrf.ok(principal, str(form.get("csrf", ""))):
            return Response("This form has expired: reload the status page and press the button again.", 403)
        if allowed is not None and name not in allowed:
            return self.page(request, "error.html", principal, 404, message=f"No collection named '{name[:80]}'.")
        self.jobs.start(name)
        return RedirectResponse("/status", status_code=303)

    async def login(self, request: Request) -> Response:
        target = safe_next(request.query_params.get("next"))
        if not self.gate.login_fields or self.gate.authorize(request) is not None:
            return RedirectResponse(target, status_code=303)
        if request.method == "GET":
            return self.page(request, "login.html", None, fields=self.gate.login_fields, next=target)
        form = await request.form()
        value = self.gate.sign_in({k: str(v) for k, v in form.items() if k in self.gate.login_fields})
        target = safe_next(str(form.get("next", "")))
        if value is None:
            return self.page(request, "login.html", None, 401, fields=self.gate.login_fields, next=target,
                             message=WRONG_SIGN_IN.get(self.gate.login_fields, WRONG_SIGN_IN[("token",)]))
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(**cookie_args(request, value))
        return response

    @signed_in
    async def logout(self, request: Request, principal: Principal) -> Response:
        form = await request.form()
        if not self.csrf.ok(principal, str(form.get("csrf", ""))):
            return Response("This form has expired: reload the page and sign out again.", 403)
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
