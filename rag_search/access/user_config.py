"""Writing the `users:` section of the config file (`local-rag users ...`), leaving the rest of the file as written.

YAML: the `users:` block (from its line to the next line that starts at the first column) is replaced by the
new one, or appended when there is none; comments elsewhere stay. A seed config.json is rewritten as JSON.
The new file is validated before it replaces the old one, so a bad edit never leaves a broken config.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from rag_search.config import Settings, load_settings
from rag_search.errors import ConfigError

_SECTION = re.compile(r"users\s*:")


def read_users(path: Path) -> dict[str, dict[str, Any]]:
    """The users section as plain data (validated), {} when there is none."""
    return {name: {"key_sha256": u.key_sha256} | u.model_dump(exclude_defaults=True)
            for name, u in load_settings(path).users.items()}


def save_users(path: Path, entries: dict[str, dict[str, Any]]) -> Settings:
    """Write `entries` as the users section of the config file at `path` (created if missing)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if path.suffix == ".json":
        data = json.loads(text or "{}")
        data["users"] = entries
        new = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        new = replace_section(text, entries)
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(new, encoding="utf-8")
    try:
        settings = load_settings(tmp)
    except ConfigError as exc:
        tmp.unlink()
        raise ConfigError(f"{path} was left unchanged: the edit would not validate ({exc})") from exc
    if path.exists():
        os.chmod(tmp, path.stat().st_mode & 0o777)
    os.replace(tmp, path)
    return settings


def replace_section(text: str, entries: dict[str, dict[str, Any]]) -> str:
    block = yaml.safe_dump({"users": entries}, sort_keys=False, allow_unicode=True, default_flow_style=None)
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    if start is None:
        lead = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + lead + block
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "\t", "\n", "\r")),
               len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # blank lines before the next section stay
    return "".join(lines[:start]) + block + "".join(lines[end:])
