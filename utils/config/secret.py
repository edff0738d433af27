"""The one secrets loader (``HF_TOKEN``) and the env file that carries config and secrets into docker.

Why not docker's ``--env-file``: it copies a line verbatim, so a token with a trailing ``# mine`` would arrive broken;
``secrets.env`` is read as a shell does and rendered as plain ``KEY=value`` lines. A secret is never printed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote

from utils.config.envfile import EnvFileError, read_env_file
from utils.config.rules import ConfigError
from utils.io.atomic import atomic_path
from utils.io.sanitise import unsafe_character

# secrets.env lives at the repository root (this file is utils/config/secret.py).
DEFAULT_SECRETS_FILE = Path(__file__).resolve().parents[2] / "secrets.env"
# The secrets tprimat uses; only these reach a container.
SECRET_KEYS = ("HF_TOKEN", "HISTORY_DB_PASSWORD")  # the second: evaluate/history/store.py
_WHITESPACE = b" \t\n\r\x0b\x0c"
# A password in a database location however it is written: a URL's userinfo as SQLAlchemy reads it (the user ends at
# ``:`` or ``/``, the password at the last ``@`` of the word: any characters), libpq's ``password=`` and
# ``sslpassword=`` (a query parameter or a keyword/value DSN); :func:`holds_password` also reads it percent-decoded.
_USERINFO_PASSWORD = re.compile(r"(://[^:/@\s]*:)\S*@")
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)[^&\s]*", re.IGNORECASE)


def holds_password(location: str) -> bool:
    """Whether a database location (HISTORY_DB) carries a password in any spelling: it may not, config is printed."""
    return any(rule.search(text) for text in (location, unquote(location))
               for rule in (_USERINFO_PASSWORD, _KEYWORD_PASSWORD))


def mask_passwords(text: str) -> str:
    """``text`` with every password a database location in it spells (see :func:`holds_password`) shown as ``***``."""
    return _KEYWORD_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", text))


def _checked(name: str, value: bytes, where: str) -> bytes | None:
    """``value`` when it can be a token; refused in one line that never shows it. A control character (C1 and
    bidirectional ones, and bytes that are no UTF-8, too) or surrounding whitespace is refused, not stripped: the leak
    check before packing (``utils/files/wrap.py``) must look for exactly the bytes a log would hold."""
    if not value:
        return None
    if unsafe_character(os.fsdecode(value)):
        raise ConfigError(f"{name} from {where}: the value holds a control character; refused (value not shown)")
    if value.strip(_WHITESPACE) != value:
        raise ConfigError(f"{name} from {where}: the value has whitespace around it; refused (value not shown)")
    return value


def read_secret_bytes(name: str, environ: Mapping[str, str] | None = None,
                      secrets_file: Path | None = None) -> bytes | None:
    """A secret's exact bytes: the environment's (as the process received them), else ``secrets.env``'s (UTF-8). None
    when neither has it; :class:`ConfigError` (without the value) when it has a control character or surrounding
    whitespace."""
    if environ is None:
        raw = os.environb.get(name.encode()) if os.supports_bytes_environ else os.environ.get(name, "").encode()
    else:
        raw = os.fsencode(environ.get(name, ""))
    value = _checked(name, raw or b"", "the environment")
    if value is not None:
        return value
    path = Path(secrets_file or DEFAULT_SECRETS_FILE)
    if not path.exists():
        return None
    try:
        text = read_env_file(path, secret=True, label="secrets file").get(name, "")
    except EnvFileError as exc:
        raise ConfigError(str(exc)) from None
    return _checked(name, text.encode("utf-8"), str(path))


def read_secret(name: str, environ: Mapping[str, str] | None = None, secrets_file: Path | None = None) -> str | None:
    """Return a secret (e.g. ``HF_TOKEN``) from the environment, else ``secrets.env``; None when neither has it."""
    value = read_secret_bytes(name, environ, secrets_file)
    return None if value is None else os.fsdecode(value)


def docker_env_lines(config_values: Mapping[str, str], environ: Mapping[str, str] | None = None,
                     secrets_file: Path | None = None) -> list[str]:
    """``KEY=value`` lines for ``docker run --env-file``: ``config_values`` then every secret that is set (docker
    takes a value verbatim to the line end: a value with a line break is an error naming the key only)."""
    pairs = list(config_values.items())
    for key in SECRET_KEYS:
        secret = read_secret(key, environ, secrets_file)
        if secret is not None:
            pairs.append((key, secret))
    for key, value in pairs:
        if "\n" in value or "\r" in value:
            raise ConfigError(f"{key}: the value holds a line break, which docker --env-file cannot carry")
    return [f"{key}={value}" for key, value in pairs]


def write_docker_env_file(path: Path, config_values: Mapping[str, str], environ: Mapping[str, str] | None = None,
                          secrets_file: Path | None = None) -> None:
    """Write :func:`docker_env_lines` to ``path`` atomically, readable by its owner only (it may hold a secret)."""
    lines = docker_env_lines(config_values, environ, secrets_file)
    with atomic_path(Path(path)) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))
