"""A git repository built with the git CLI for the code source tests (../shared/reference/sources.md §9).

Deterministic names, emails and messages; dates relative to now, so the history window holds the recent
commits and not the root one (400 days old). What it holds:

- tracked code in several languages (parse_config in Python, parseConfig in TypeScript), a README, a CRLF file, a non-ASCII path (docs/über.md), a file whose
  path looks like a commit key, a text script without suffix, a generated Go file (header), a 40 KB SQL
  dump (over the tests' max_file_kb of 32), an LFS pointer;
- skipped by name or attributes: a lock file, vendor/, a *.min.js, a *.pb.go, gen/ (linguist-generated),
  *.dat (binary), data/huge.csv (linguist-generated, it comes later), a PNG, a suffix-less binary, a symlink, a submodule (gitlink); vendor/ours/ is
  un-vendored by `-linguist-vendored`;
- ignored (secret.env, build/) and untracked (notes.txt) files;
- history: the root commit (outside the window), a rename with an edit by a mailmapped author, a branch
  and its merge, a lock file update, an empty commit, an ISO-8859-1 message, a commit whose author date
  is outside the window but its commit date inside, a Co-authored-by trailer and a huge diff.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAY = 86_400
ANN = ("Ann Example", "ann@example.com")
BOB_OLD = ("bob", "Bob@Old.Example")  # .mailmap maps him to Bob Builder <bob@example.com>
CAROL = ("Carol Diaz", "carol@example.com")
DANA = ("Dana Kim", "dana@example.com")

SETTINGS_PY = '''"""Settings: read key=value files."""
import os


def parse_config(path):
    """Read a key=value file into a dict."""
    with open(path, encoding="utf-8") as fh:
        return SettingsLoader().read_pairs(fh.read())


class SettingsLoader:
    """Loads settings for the checkout service."""

    def __init__(self, defaults=None):
        self.values = dict(defaults or {})

    def read_pairs(self, text):
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip():
                self.values[key.strip()] = value.strip()
        return self.values
'''
SERVER_GO = '''package server

import "net/http"

// RetryPolicy says how often a payment is retried.
type RetryPolicy struct {
	Attempts int
}

// HandleCheckout charges the cart and answers with the receipt.
func HandleCheckout(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
}
'''
MAIN_TF = '''variable "region" {
  default = "eu-central-1"
}

resource "aws_s3_bucket" "invoices" {
  bucket = "shop-invoices"
}
'''
CART_TS = '''export interface CartLine {
  sku: string;
  quantity: number;
}

export function cartTotal(lines: CartLine[], prices: Map<string, number>): number {
  return lines.reduce((sum, l) => sum + (prices.get(l.sku) ?? 0) * l.quantity, 0);
}
'''
CONFIG_TS = '''// Reads the storefront's settings file.
export function parseConfig(text: string): Map<string, string> {
  const values = new Map<string, string>();
  for (const line of text.split("\\n")) {
    const [key, value] = line.split("=");
    if (key.trim()) values.set(key.trim(), (value ?? "").trim());
  }
  return values;
}
'''
README = "# Shop API\n\nHow we parse config files: one key=value pair per line.\n"
LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"a" * 64 + b"\nsize 12345\n"
LOOKALIKE = "commit/" + "ab" * 20  # a file whose path is shaped like a commit's key


@dataclass
class Built:
    path: Path
    commits: dict[str, str] = field(default_factory=dict)  # label → sha
    authored: dict[str, int] = field(default_factory=dict)  # label → author unix time

    def sha(self, label: str) -> str:
        return self.commits[label]


def git(repo: Path, *args: str | bytes, who=ANN, when: int | None = None, committed: int | None = None) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1],
           "GIT_COMMITTER_NAME": ANN[0], "GIT_COMMITTER_EMAIL": ANN[1], "LC_ALL": "C"}
    if when is not None:
        env["GIT_AUTHOR_DATE"] = f"@{when} +0100"
        env["GIT_COMMITTER_DATE"] = f"@{committed or when} +0100"
    out = subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args],
                         cwd=repo, env=env, capture_output=True, check=True)
    return out.stdout.decode("utf-8", "replace").strip()


def write(repo: Path, rel: str, data: str | bytes) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)


def commit(built: Built, label: str, message: str | bytes, when: int, who=ANN, committed: int | None = None,
           *extra: str, encoding: str | None = None) -> str:
    git(built.path, "add", "-A")
    config = ("-c", f"i18n.commitEncoding={encoding}") if encoding else ()
    git(built.path, *config, "commit", "-q", "--no-verify", *extra, "-m", message, who=who, when=when,
        committed=committed)
    built.commits[label] = git(built.path, "rev-parse", "HEAD")
    built.authored[label] = when
    return built.commits[label]


def build(root: Path, now: int | None = None) -> Built:
    now = int(time.time()) if now is None else now
    repo = root / "shop-api"
    repo.mkdir(parents=True)
    built = Built(repo)
    git(repo, "init", "-q")
    files = {
        ".gitignore": "secret.env\nbuild/\n",
        ".gitattributes": "*.dat binary\ngen/** linguist-generated\nvendor/ours/** -linguist-vendored\n"
                          "data/huge.csv linguist-generated\n",
        ".mailmap": "Bob Builder <bob@example.com> <bob@old.example>\n",
        "src/config_loader.py": SETTINGS_PY, "server/main.go": SERVER_GO, "infra/main.tf": MAIN_TF,
        "web/cart.ts": CART_TS, "web/config.ts": CONFIG_TS, "README.md": README, "old_notes.txt": "Notes that are deleted later.\n",
        "win.txt": "first line\r\nsecond line\r\n", "tools/deploy": "#!/bin/sh\necho deploying the shop\n",
        "server/wire.go": "// Code generated by Wire. DO NOT EDIT.\n\npackage server\n",
        "data/dump.sql": "INSERT INTO t VALUES (1);\n" * 1700, "data/model.weights": LFS, LOOKALIKE: "not a commit\n",
        "package-lock.json": '{"lockfileVersion": 3}\n', "vendor/lib/left-pad.js": "module.exports = 1;\n",
        "vendor/ours/patch.js": "export const patched = true;\n", "web/app.min.js": "var a=1;\n",
        "server/api.pb.go": "package server\n", "gen/client.py": "x = 1\n", "data/blob.dat": "text but binary\n",
        "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "tools/mystery": b"\x7fELF\x00\x00\x01binary",
    }
    for rel, data in files.items():
        write(repo, rel, data)
    (repo / "link-to-readme").symlink_to("README.md")
    commit(built, "root", "Initial import of the shop API", now - 400 * DAY)
    (repo / "libs" / "payments").mkdir(parents=True)  # an unpopulated submodule: its folder is empty
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{built.sha('root')},libs/payments")
    git(repo, "commit", "-q", "-m", "Add the payments submodule", when=now - 399 * DAY)
    built.commits["submodule"] = git(repo, "rev-parse", "HEAD")

    git(repo, "mv", "src/config_loader.py", "src/settings.py")
    write(repo, "src/settings.py", SETTINGS_PY.replace("checkout service", "checkout and billing services"))
    write(repo, "docs/über.md", "# Über\n\nThe refund window is fourteen days.\n")
    (repo / "old_notes.txt").unlink()
    commit(built, "rename", "Rename the config loader to settings\n\nIt loads more than config now.",
           now - 60 * DAY, BOB_OLD)

    git(repo, "checkout", "-q", "-b", "feature/discounts")
    write(repo, "web/discount.ts", "export function applyDiscount(total: number, percent: number): number {\n"
          "  return total * (1 - percent / 100);\n}\n")
    commit(built, "feature", "Add percentage discounts", now - 50 * DAY, CAROL)
    git(repo, "checkout", "-q", "main")
    write(repo, "server/main.go", SERVER_GO.replace("StatusOK", "StatusAccepted"))
    write(repo, "package-lock.json", '{"lockfileVersion": 3, "packages": {}}\n')
    commit(built, "main", "Answer checkout with 202 Accepted", now - 49 * DAY)
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature/discounts'", "feature/discounts",
        when=now - 48 * DAY)
    built.commits["merge"], built.authored["merge"] = git(repo, "rev-parse", "HEAD"), now - 48 * DAY

    commit(built, "empty", "chore: trigger the pipeline", now - 40 * DAY, ANN, None, "--allow-empty")
    write(repo, "win.txt", "first line\r\nsecond line, changed\r\n")
    commit(built, "latin1", "Fix für die Größe der Rechnung".encode("latin-1"), now - 30 * DAY, encoding="ISO-8859-1")
    write(repo, "server/retry.go", "package server\n\n// RetryPayment retries a declined card payment.\n"
          "func RetryPayment(attempts int) bool {\n\treturn attempts < 3\n}\n")
    commit(built, "skew", "Backport: retry declined payments", now - 300 * DAY, DANA, now - 20 * DAY)
    write(repo, "src/settings.py", (repo / "src/settings.py").read_text() +
          "\n\ndef config_path(name):\n    return os.path.join('/etc/shop', name)\n")
    write(repo, "data/huge.csv", "".join(f"{i},row {i}\n" for i in range(1500)))
    commit(built, "coauthor", "Add config_path helper\n\nCo-authored-by: Erin Park <Erin@Example.com>",
           now - 10 * DAY)
    write(repo, "notes.txt", "untracked notes\n")
    write(repo, "secret.env", "TOKEN=hunter2\n")
    write(repo, "build/out.log", "build output\n")
    return built
