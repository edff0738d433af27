"""A database password never shows, however HISTORY_DB or ``--db`` spells it and wherever the connection fails
(issue 49: secrets in every URL spelling, ``utils/config/secret.py`` ``holds_password``/``mask_passwords`` and
``evaluate/history/target.py``).

config.env refuses every spelling (config keys are printed); ``--db`` takes one and every message masks it: a
closed port, a missing socket, a server that hangs up at once or after the start-up, a server whose own error
message quotes the password, and (with ``TPRIMAT_TEST_POSTGRES_URL``) a real server's authentication failure and a
missing database. The fake servers speak just enough of PostgreSQL's protocol (version 3) to be libpq's peer.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from sqlalchemy.engine import make_url

from evaluate.history.target import HistoryError, resolve_target, scrub
from tests.helpers.history import cli, postgres_admin_url, results
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.config.secret import holds_password

CANARY = "C4n@ry/S3c:ret"
FORMS = (CANARY, quote(CANARY, safe=""), quote_plus(CANARY), "S3c")  # "S3c": no part of it either
ENCODED = quote(CANARY, safe="")
# Every spelling of a password in a database location: (spelling, whether --db may use it).
SPELLINGS = {
    "userinfo, percent-encoded": (f"postgresql://u:{ENCODED}@HOST/db", True),
    "userinfo, every character encoded": ("postgresql://u:" + "".join(f"%{b:02X}" for b in CANARY.encode())
                                          + "@HOST/db", True),
    "userinfo with a slash, as SQLAlchemy reads it": ("postgresql://u:C4nry/S3c:ret@HOST/db", True),
    "query password=": (f"postgresql://u@HOST/db?password={ENCODED}", True),
    "query password=, percent-encoded name": (f"postgresql://u@HOST/db?pass%77ord={ENCODED}", True),
    "query sslpassword=": (f"postgresql://u@HOST/db?sslpassword={ENCODED}", True),
    "userinfo with a raw @": (f"postgresql://u:{CANARY}@HOST/db", False),
    "two passwords": (f"postgresql://u:{ENCODED}@HOST/db?password={ENCODED}", False),
    "a keyword/value DSN": (f"host=HOST user=u password={CANARY}", False),
}


def _clean(text: str) -> bool:
    return not any(form in text for form in FORMS)


@pytest.mark.parametrize("name", list(SPELLINGS))
def test_config_refuses_every_spelling_without_showing_it(name: str) -> None:
    value = SPELLINGS[name][0].replace("HOST", "db.example")
    assert holds_password(value)
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"HISTORY_DB": value})
    assert "HISTORY_DB holds a password" in str(caught.value) and _clean(str(caught.value))


def test_a_location_without_a_password_is_not_taken_for_one() -> None:
    for value in ("postgresql://u@db.example:5432/tprimat", "sqlite:///tmp/h.sqlite", "history/h.sqlite", "off"):
        assert not holds_password(value) and load_config(environ={"HISTORY_DB": value}).history_db == value


@pytest.mark.parametrize("name", list(SPELLINGS))
def test_db_takes_a_password_once_or_refuses_the_url_and_never_shows_it(name: str) -> None:
    value, usable = SPELLINGS[name]
    value = value.replace("HOST", "db.example")
    if not usable:
        with pytest.raises(HistoryError) as caught:
            resolve_target(value, {})
        assert _clean(str(caught.value))
        return
    target = resolve_target(value, {})
    assert target is not None and _clean(target.shown) and target.secrets
    assert "password" not in target.url.query  # one password, the URL's: libpq gets no second
    secret = target.secrets[0]
    assert _clean(scrub(f"failed: {value} {target.url.render_as_string(hide_password=False)} {secret}", target))


class FakeServer:
    """A PostgreSQL server on 127.0.0.1 that ``answers`` each start-up: ``hangup`` (close at once), ``auth`` (ask for
    the password, then refuse it quoting it, as a hostile or careless server could), ``gone`` (accept the
    login, then close at the first query: a server gone mid-add)."""

    def __init__(self, answers: str) -> None:
        self.answers = answers
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _message(kind: bytes, body: bytes) -> bytes:
        return kind + struct.pack("!i", len(body) + 4) + body

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        while True:
            head = conn.recv(8)
            if len(head) < 8:
                return
            length, code = struct.unpack("!ii", head)
            conn.recv(length - 8)
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: neither
                conn.sendall(b"N")
                continue
            if self.answers == "auth":  # ask for the password in clear, then quote it in the refusal
                conn.sendall(self._message(b"R", struct.pack("!i", 3)))
                password = conn.recv(65536)[5:].rstrip(b"\0")
                conn.sendall(self._message(b"E", b"SFATAL\0VFATAL\0C28P01\0Mpassword \"" + password
                                           + b"\" failed for user \"u\"\0\0"))
            elif self.answers == "gone":
                conn.sendall(self._message(b"R", struct.pack("!i", 0))
                             + self._message(b"S", b"server_version\x0015.0\0")
                             + self._message(b"S", b"client_encoding\0UTF8\0")
                             + self._message(b"K", struct.pack("!ii", 1, 2)) + self._message(b"Z", b"I"))
                conn.recv(65536)  # the first query: hang up
            return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=["closed port", "missing socket", "hangup", "auth", "gone"])
def host(request: pytest.FixtureRequest) -> Iterator[str]:
    """Where each failure happens, as the HOST of a URL."""
    if request.param == "closed port":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        yield f"127.0.0.1:{port}"
    elif request.param == "missing socket":
        yield ""  # with ?host=/nonexistent below
    else:
        server = FakeServer(request.param)
        yield f"127.0.0.1:{server.port}"
        server.close()


def _commands(tmp_path: Path) -> list[list[str]]:
    out = tmp_path / "out"
    return [["add", *map(str, results(out, 1))], ["list"], ["trend", "--png", "none"], ["diff", "1", "2"]]


@pytest.mark.parametrize("name", [name for name, (_, usable) in SPELLINGS.items() if usable])
def test_every_failure_is_one_line_without_the_password(name: str, host: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    value = SPELLINGS[name][0].replace("HOST", host)
    if not host:
        value += ("&" if "?" in value else "?") + "host=/nonexistent"
    for command in _commands(tmp_path):
        done = cli(capsys, command[0], "--db", value, "--lock-timeout", "2", *command[1:])
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert _clean(done.stdout + done.stderr), done.stderr
    gate = cli(capsys, "--db", value, "--candidate", str(tmp_path / "out"), module="evaluate.gate")
    assert gate.returncode == 2 and _clean(gate.stdout + gate.stderr), gate.stderr


@pytest.mark.parametrize("fault", ["wrong password", "missing database"])
def test_a_real_servers_refusal_is_one_line_without_the_password(fault: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    admin = make_url(postgres_admin_url() or "")
    url = admin.set(password=CANARY) if fault == "wrong password" else admin.set(database="tprimat_no_such_db")
    value = url.render_as_string(hide_password=False)
    secret = admin.password or ""
    for command in _commands(tmp_path):
        done = cli(capsys, command[0], "--db", value, *command[1:])
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert _clean(done.stdout + done.stderr) and secret not in done.stdout + done.stderr, done.stderr
