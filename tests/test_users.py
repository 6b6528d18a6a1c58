"""Users and keys without a server: `local-rag users ...` on a real config file, the wrong-key limiter, the query log's
rotation, the self-signed certificate, and a handshake that does not wait for the model."""

from __future__ import annotations

import json
import logging
import re
import threading

import pytest
import yaml
from click.testing import CliRunner

from rag_search.access import http_keys
from rag_search.access import users
from rag_search.cli.main import cli
from rag_search.config import Paths
from rag_search.errors import ConfigError
from rag_search.access.query_log import QueryLog

CONFIG = """\
# my settings, with comments that must stay
search:
  top_k: 7   # fewer hits
users:
  old:
    key_sha256: %s
    collections: [notes]
# people
people:
  known: {Ann: [ann@example.com]}
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path))
    (tmp_path / "config.yaml").write_text(CONFIG % ("ab" * 32))
    return Paths.from_env()


def run(*args):
    return CliRunner().invoke(cli, ["users", *args], catch_exceptions=False)


def test_users_add_prints_a_key_once_and_keeps_only_its_hash_and_the_rest_of_the_file(home):
    out = run("add", "ann", "--collections", "family,recipes", "-c", "garden", "--root", "/srv/ann")
    assert out.exit_code == 0, out.output
    assert "/srv/ann does not exist yet" in out.stderr and "only once mcp.allowed_roots" in out.stderr
    key = out.stdout.strip()
    assert key.startswith("lrag_") and len(key) > 40 and "\n" not in key
    text = home.config.read_text()
    assert key not in text and users.key_hash(key) in text
    assert "# my settings, with comments that must stay" in text and "top_k: 7   # fewer hits" in text
    assert "# people" in text and "known: {Ann: [ann@example.com]}" in text
    user = users.directory(home).find(key)
    assert user == users.User("ann", frozenset({"family", "recipes", "garden"}), ("/srv/ann",), uid=user.uid)
    assert re.fullmatch(r"u:[0-9a-f]{24}", user.id)  # a stable id of its own (what ann adds belongs to it)
    assert users.directory(home).find(key + "x") is None and users.directory(home).find("") is None
    listed = run("list")
    assert "ann: reads family, recipes, garden; may add folders under /srv/ann" in listed.output
    assert key not in listed.output and "key_sha256" not in run("list", "--json").output


def test_users_key_grant_revoke_remove(home):
    key = run("add", "bob", "-c", "work").stdout.strip()
    new = run("key", "bob").stdout.strip()
    assert new != key and users.directory(home).find(key) is None and users.directory(home).find(new).name == "bob"
    run("grant", "bob", "garden", "work")
    assert users.directory(home).find(new).collections == {"work", "garden"}
    run("revoke", "bob", "work")
    assert users.directory(home).find(new).collections == {"garden"}
    assert run("remove", "bob").exit_code == 0
    assert users.directory(home).find(new) is None and "old" in yaml.safe_load(home.config.read_text())["users"]


def test_users_refuses_a_bad_name_a_duplicate_and_an_unknown_user_and_leaves_the_file(home):
    before = home.config.read_text()
    for args, said in [(("add", "a b"), "cannot be a user name"), (("add", "old"), "exists"),
                       (("add", "Owner"), "it is the server's owner's"),  # the page and the query log name the owner so
                       (("key", "nobody"), "No user 'nobody'"), (("remove", "nobody"), "users: old")]:
        out = CliRunner().invoke(cli, ["users", *args])
        assert out.exit_code != 0 and said in out.output, (args, out.output)
    assert home.config.read_text() == before


def test_a_config_json_and_a_missing_config_get_a_users_section(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path))
    key = run("add", "ann").stdout.strip()  # no config file yet
    assert users.directory(Paths.from_env()).find(key).name == "ann"
    json_home = tmp_path / "seed"
    json_home.mkdir()
    (json_home / "config.json").write_text(json.dumps({"calibre_libraries": ["/books"]}))
    monkeypatch.setenv("LOCAL_RAG_HOME", str(json_home))
    key = run("add", "bob").stdout.strip()
    data = json.loads((json_home / "config.json").read_text())
    assert data["calibre_libraries"] == ["/books"] and data["users"]["bob"]["key_sha256"] == users.key_hash(key)


def test_a_broken_config_edit_keeps_the_last_users(home):
    key = run("add", "ann").stdout.strip()
    assert users.directory(home).find(key).name == "ann"
    home.config.write_text(home.config.read_text() + "\nusers: [not, a, mapping\n")  # half-saved
    assert users.directory(home).find(key).name == "ann"  # not everyone locked out, nobody let in


def test_users_in_a_users_file_beside_a_read_only_config(tmp_path, monkeypatch):
    """config.yaml names users_file (as the Kubernetes recipe does, its config a read-only ConfigMap): `users` writes
    there, config.yaml is never touched, a running directory sees each change; a users: section in both is refused."""
    monkeypatch.setenv("LOCAL_RAG_HOME", str(tmp_path))
    held = tmp_path / "writable" / "users.yaml"
    held.parent.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(f"search:\n  top_k: 7\nusers_file: {held}\n")
    before = config.read_text()
    paths = Paths.from_env()
    assert users.directory(paths).users == {}  # no users file yet: nobody
    key = run("add", "ann", "-c", "notes").stdout.strip()
    assert users.directory(paths).find(key).name == "ann" and "ann:" in run("list").output
    assert list(yaml.safe_load(held.read_text())) == ["users"] and config.read_text() == before
    run("remove", "ann")
    assert users.directory(paths).find(key) is None
    held.write_text("users: {}\nsearch: {top_k: 3}\n")
    with pytest.raises(ConfigError, match="may hold only a users: section"):
        users.load_settings(config)
    config.write_text(f"users_file: {held}\nusers: {{bob: {{key_sha256: '{'ab' * 32}'}}}}\n")
    with pytest.raises(ConfigError, match="Move its entries there"):
        users.load_settings(config)


# -- wrong keys --------------------------------------------------------------------------------------

def test_wrong_keys_wait_longer_each_time_up_to_five_minutes_and_are_forgotten_after_a_quiet_while():
    now = [0.0]
    limiter = http_keys.Limiter(clock=lambda: now[0])
    waits = []
    for _ in range(16):
        assert limiter.wait("10.0.0.9") == 0
        limiter.failed("10.0.0.9")
        waits.append(limiter.wait("10.0.0.9"))
        now[0] += waits[-1]
    assert waits == [0] * 5 + [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    limiter.failed("10.0.0.9")
    assert limiter.wait("10.0.0.8") == 0  # per address
    now[0] += http_keys.LONGEST_WAIT + http_keys.FORGET_AFTER + 1
    limiter.failed("10.0.0.9")  # a wrong key after a quiet quarter of an hour is the first again
    assert limiter.wait("10.0.0.9") == 0


def test_a_right_key_works_from_a_waiting_address_and_clears_nothing(tmp_path):
    now = [0.0]
    strong, short = "lrag_" + "k" * 43, "s3cret"
    access = http_keys.Access(None, strong, open_when_keyless=False, limiter=http_keys.Limiter(lambda: now[0]))
    answers = [access.check("127.0.0.1", f"lrag_guess{i}") for i in range(6)]
    assert [a.status for a in answers] == [403] * 6  # loopback is slowed too
    assert access.check("127.0.0.1", strong) is users.OWNER  # while it waits: a strong right key still works
    wrong = access.check("127.0.0.1", "lrag_guess7")
    assert wrong.status == 429 and wrong.retry_after == 1  # the right key cleared nothing
    now[0] += 1.5
    assert access.check("127.0.0.1", "lrag_guess8").status == 403
    assert access.check("127.0.0.1", "lrag_guess9").status == 429 and access.limiter.wait("127.0.0.1") == 2
    weak = http_keys.Access(None, short, open_when_keyless=False, limiter=access.limiter)
    assert weak.check("127.0.0.1", short).status == 429  # a short token is guessable: it waits with its address
    assert weak.check("127.0.0.2", short) is users.OWNER


def test_forwarded_addresses_count_only_from_named_proxies():
    from rag_search.access.proxies import forwarded_client, networks

    proxies = networks(["127.0.0.1", "10.0.0.0/8"])
    assert forwarded_client("192.0.2.7", "198.51.100.1", proxies) == "192.0.2.7"  # not a proxy: its own address
    assert forwarded_client("127.0.0.1", "198.51.100.1", ()) == "127.0.0.1"  # no proxy named: loopback is loopback
    assert forwarded_client("127.0.0.1", "203.0.113.9, 198.51.100.1, 10.1.2.3", proxies) == "198.51.100.1"
    assert forwarded_client("10.0.0.5", "10.0.0.4", proxies) == "10.0.0.5"  # only proxies: the connection's
    with pytest.raises(ConfigError, match="not an address or network"):
        networks(["proxy.local"])


def test_the_limiter_remembers_a_bounded_number_of_addresses(monkeypatch):
    monkeypatch.setattr(http_keys, "MAX_ADDRESSES", 100)
    limiter = http_keys.Limiter(clock=lambda: 0.0)
    for i in range(1_000):
        for _ in range(7):
            limiter.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(limiter._seen) == 100 and limiter.wait("10.0.3.231") > 0  # the newest are kept


# -- the query log -----------------------------------------------------------------------------------

def test_the_query_log_rotates_by_size_and_keeps_n_files(tmp_path):
    log = QueryLog(tmp_path, max_bytes=2_000, keep=3)
    for i in range(100):
        log.record("ann", "rag_search", {"query": f"question {i}", "top_k": 5}, {"hits": [{"key": f"k{i}.md"}]}, 0.0)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["query-log.1.jsonl", "query-log.2.jsonl", "query-log.3.jsonl", "query-log.jsonl"]
    assert all(p.stat().st_size <= 2_000 for p in tmp_path.iterdir())
    last = json.loads((tmp_path / "query-log.jsonl").read_text().splitlines()[-1])
    assert last["query"] == "question 99" and last["hits"] == ["k99.md"] and last["filters"] == {"top_k": 5}
    oldest = json.loads((tmp_path / "query-log.3.jsonl").read_text().splitlines()[0])["query"]
    assert int(oldest.split()[1]) > 0  # the first lines were dropped


def test_the_query_log_finds_hit_keys_in_every_kind_of_answer():
    from rag_search.access.query_log import hit_keys

    assert hit_keys({"hits": [{"key": "a"}, {"key": "b"}], "note": "x"}) == ["a", "b"]
    assert hit_keys({"items": [{"key": "c"}]}) == ["c"] and hit_keys({"similar": [{"key": "d"}]}) == ["d"]
    assert hit_keys({"results": [{"hits": [{"key": "e"}]}, {"hits": [{"key": "f"}]}]}) == ["e", "f"]  # a batch
    assert hit_keys({"items": 3, "collections": [{"name": "x"}]}) == [] and hit_keys(None) == []


# -- TLS ---------------------------------------------------------------------------------------------

def test_the_self_signed_certificate_is_kept_and_made_anew_for_a_new_name(tmp_path):
    import subprocess

    from rag_search.access import tls

    first = tls.certificate(tmp_path, {"localhost", "127.0.0.1", "[::1]"})
    assert first.made and first.self_signed and oct(first.key.stat().st_mode & 0o777) == "0o600"
    shown = subprocess.run(["openssl", "x509", "-in", str(first.cert), "-noout", "-fingerprint", "-sha256"],
                           capture_output=True, text=True).stdout
    assert shown.strip().endswith(first.fingerprint)
    again = tls.certificate(tmp_path, {"localhost", "::1"})
    assert not again.made and again.fingerprint == first.fingerprint  # clients' pins stay valid
    renamed = tls.certificate(tmp_path, {"localhost", "notes.lan"})
    assert renamed.made and renamed.fingerprint != first.fingerprint
    mine = tls.certificate(tmp_path / "x", set(), cert=str(first.cert), key=str(first.key))
    assert not mine.self_signed and mine.fingerprint == renamed.fingerprint  # the same files, renewed
    with pytest.raises(ConfigError, match="both a certificate and its key"):
        tls.certificate(tmp_path, set(), cert=str(first.cert))
    with pytest.raises(ConfigError, match="does not exist"):
        tls.certificate(tmp_path, set(), cert=str(tmp_path / "no.pem"), key=str(first.key))


def test_tls_is_for_the_http_server():
    out = CliRunner().invoke(cli, ["serve", "--tls"])
    assert out.exit_code == 2 and "--tls is for the HTTP server: add --http" in out.output


# -- the handshake does not wait for the model ------------------------------------------------------

class GatedEmbedder:
    """The fake embedder, whose first use waits until the test opens the gate (a model loading slowly)."""

    def __init__(self, inner, gate: threading.Event):
        self.inner, self.gate = inner, gate
        self.id, self.dimensions, self.max_input_tokens = inner.id, inner.dimensions, inner.max_input_tokens

    def embed_query(self, text):
        self.gate.wait()
        return self.inner.embed_query(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_the_server_answers_the_handshake_while_the_model_loads(tmp_path, fake_embedder, monkeypatch):
    import asyncio

    from conftest import add_doc
    from mcp.client import Client

    from rag_search.mcp import server as mcp_server
    from rag_search.store import Store

    store = Store.open(tmp_path / "rag.db")
    add_doc(store, fake_embedder, "notes", "a.md", "the model loads in the background")
    store.close()
    gate = threading.Event()
    monkeypatch.setattr(mcp_server, "load_embedder", lambda *a: GatedEmbedder(fake_embedder, gate))
    paths = Paths.from_env({"LOCAL_RAG_HOME": str(tmp_path)})
    opened = threading.Thread(target=mcp_server.open_context, args=(paths,), daemon=True)
    opened.start()
    opened.join(timeout=30)
    try:
        assert not opened.is_alive(), "open_context waited for the model"

        async def go():
            async with Client(mcp_server.build_server()) as c:
                listed = await c.list_tools()  # the handshake and tools/list: no model needed
                search = asyncio.create_task(c.call_tool("rag_search", {"query": "background"}))
                await asyncio.sleep(0.2)
                assert not search.done()  # the first search waits for the model
                gate.set()
                return listed, await search

        listed, found = asyncio.run(go())
        assert "rag_search" in {t.name for t in listed.tools} and "a.md" in found.content[0].text
    finally:
        gate.set()
        mcp_server.close_context()


def test_dagster_storage_chatter_stays_off_the_servers_stderr(monkeypatch):
    """rag_index runs Dagster, whose SQLite storage logs alembic's schema stamps at INFO: never to stderr, even
    when the server's log level is INFO (over stdio, stderr is the client's log)."""
    from rag_search.mcp import server as mcp_server

    monkeypatch.setattr(logging.getLogger(), "level", logging.INFO)
    monkeypatch.setattr(logging.getLogger("alembic"), "level", logging.NOTSET)
    mcp_server.build_server()
    assert not logging.getLogger("alembic.runtime.migration").isEnabledFor(logging.INFO)
