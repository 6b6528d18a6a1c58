"""A refusal as a person's browser shows it: a small HTML page that says what happened and what to do.

The server's own checks (Host, Origin: mcp/http.py) run before the page's app, so they answer people through this
page rather than with the JSON an MCP client reads.
"""

from __future__ import annotations

from markupsafe import escape

STYLE = ("body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}"
         "@media(prefers-color-scheme:dark){body{background:#16181b;color:#e6e6e6}a{color:#8ab4f8}}")


def page(title: str, message: str, link: tuple[str, str] | None = ("/", "Open the search page")) -> bytes:
    """The refusal's HTML (everything escaped; no script, no outside resource)."""
    more = f'<p><a href="{escape(link[0])}">{escape(link[1])}</a></p>' if link else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>{escape(title)} · local-rag</title>'
            f'<style>{STYLE}</style></head><body><h1>{escape(title)}</h1><p role="alert">{escape(message)}</p>'
            f"{more}</body></html>").encode()


def wants_html(scope) -> bool:
    """A browser's page request (not MCP, not a script asking for JSON)."""
    path = scope.get("path", "")
    if path == "/mcp" or path.startswith("/mcp/"):
        return False
    accept = next((v for k, v in scope.get("headers") or [] if k == b"accept"), b"").decode("latin-1")
    return "text/html" in accept or "application/json" not in accept


async def send(send_, status: int, title: str, message: str, link: tuple[str, str] | None = ("/", "Open the search page"),
               headers: list | None = None) -> None:
    """Answer with the page (no-store: it may name the request's own values)."""
    await send_({"type": "http.response.start", "status": status,
                 "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store"),
                             *(headers or [])]})
    await send_({"type": "http.response.body", "body": page(title, message, link)})
