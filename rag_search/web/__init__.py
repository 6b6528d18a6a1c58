"""The search page for people: the same engine as the CLI and MCP, in a browser (mounted at / of `local-rag serve`).

app.py builds the Starlette app from a Backend (backend.py: the open index and engine) and a Gate (security.py:
who is asking, which collections they may see, what the login page proves). mount.py puts it beside the MCP app.
"""

from rag_search.web.app import web_app
from rag_search.web.backend import Backend
from rag_search.web.security import Gate, Principal, TokenGate

__all__ = ["Backend", "Gate", "Principal", "TokenGate", "web_app"]
