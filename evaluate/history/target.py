"""Where the history database is, and how it is named in a message: never with its password.

``HISTORY_DB`` in config.env, or ``--db``: a file path (SQLite), a ``sqlite:///`` or ``postgresql://`` URL, or
``off``. A password never comes from the config (which is printed): it is ``HISTORY_DB_PASSWORD`` (environment or
``secrets.env``), libpq's ``PGPASSWORD`` or ``~/.pgpass``, or a ``--db`` URL; every message masks it
(:func:`scrub`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, quote_plus

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.config.rules import ConfigError
from utils.config.secret import holds_password, mask_passwords, read_secret
from utils.files.generated import HISTORY_DEFAULT
from utils.io.sanitise import one_line

DEFAULT_PATH = REPO_ROOT / HISTORY_DEFAULT
OFF_WORDS = ("off", "none", "false", "0")
PASSWORD_SECRET = "HISTORY_DB_PASSWORD"


class HistoryError(RuntimeError):
    """The database cannot be used as asked; one line, never a password."""


@dataclass(frozen=True)
class Target:
    """A resolved database location: the URL to connect to and how to show it (password masked)."""

    url: URL
    shown: str
    path: Path | None  # the SQLite file, None for a server

    @property
    def sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @property
    def password(self) -> str | None:
        return self.url.password if isinstance(self.url.password, str) else None

    @property
    def secrets(self) -> list[str]:
        """What every message masks: the password and libpq's other secret parameter (``sslpassword``)."""
        return [s for s in (self.password, self.url.query.get("sslpassword")) if isinstance(s, str) and s]


def resolve_target(value: str | None, environ: dict[str, str] | None = None) -> Target | None:
    """``value`` (``--db``, else ``HISTORY_DB``; empty: the default file) as a target; None when it is ``off``."""
    text = (value or "").strip()
    if text.lower() in OFF_WORDS:
        return None
    if not text:
        path = DEFAULT_PATH
        return Target(URL.create("sqlite", database=str(path)), str(path), path)
    if "://" not in text:
        if holds_password(text):
            raise HistoryError("history database: a password in a file path or a keyword/value DSN (value not shown); "
                               "give postgresql://USER@HOST/DB and the password in HISTORY_DB_PASSWORD")
        path = Path(text).expanduser()
        path = path if path.is_absolute() else (Path.cwd() / path)
        return Target(URL.create("sqlite", database=str(path)), str(path), path)
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise HistoryError(f"history database {one_line(mask_passwords(text.split('?')[0]), 200)}: not a database URL "
                           "(a file path, sqlite:///PATH or postgresql://USER@HOST/DB)") from None
    backend = url.get_backend_name()
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise HistoryError("history database: a sqlite URL needs a file (sqlite:///PATH)")
        path = Path(url.database).expanduser().absolute()
        return Target(URL.create("sqlite", database=str(path)), str(path), path)
    if backend in ("postgresql", "postgres"):
        return _server(url.set(drivername="postgresql+psycopg"), environ)
    shown = url.render_as_string(hide_password=True)
    raise HistoryError(f"history database {shown}: backend '{one_line(backend, 40)}' is not supported "
                       "(SQLite or PostgreSQL)")


def _server(url: URL, environ: dict[str, str] | None) -> Target:
    """A PostgreSQL target with one password, in the URL's password field (a ``?password=`` moved there, else the
    secret's), refused in one line that never shows it when the URL spells it ambiguously."""
    query = url.query.get("password")
    twice = not isinstance(query, (str, type(None))) or (query is not None and url.password is not None)
    if twice or "@" in (url.host or "") + (url.database or ""):
        raise HistoryError("history database URL: more than one '@' or password in it (value not shown); write an "
                           "'@' of a password as %40")
    if isinstance(query, str):
        url = url.difference_update_query(["password"]).set(password=query)
    if url.password is None:
        try:
            secret = read_secret(PASSWORD_SECRET, environ)
        except ConfigError as exc:
            raise HistoryError(str(exc)) from None
        url = url.set(password=secret) if secret else url
    return Target(url, mask_passwords(url.render_as_string(hide_password=True)), None)


def scrub(text: object, target: Target | None) -> str:
    """One line of ``text`` without the target's secrets (as typed, URL-quoted, in a URL or a DSN)."""
    shown = str(text)
    for secret in target.secrets if target is not None else ():
        for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
            shown = shown.replace(form, "***")
    return one_line(mask_passwords(shown), 400)


def configured_db() -> str:
    """``HISTORY_DB`` from config.env and the environment (empty: the default file).

    A relative path is the repository's, as for ``OUTPUT_DIR`` (a ``--db`` path is the working folder's).
    """
    value = (load_config().history_db or "").strip()
    if value and "://" not in value and value.lower() not in OFF_WORDS and not Path(value).expanduser().is_absolute():
        return str(REPO_ROOT / value)
    return value
