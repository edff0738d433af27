"""Is the rendezvous usable before a job starts: MASTER_ADDR resolves (quickly), MASTER_PORT is free.

Why before: torchrun retries an unresolvable address until it is killed, and a port held by the previous job's
workers fails the next job. Only node 0 binds the port; the other nodes check the address only.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import socket
import sys
import threading
import time

from utils.config.cli import exits_on_config_error, number_argument
from utils.config.load import load_config

RESOLVE_SECONDS = 5.0
PORT_WAIT_SECONDS = 30.0


def resolve_problem(address: str, timeout: float = RESOLVE_SECONDS) -> str | None:
    """Why ``address`` (MASTER_ADDR) cannot be used, or None when it resolves within ``timeout`` seconds."""
    outcome: dict[str, object] = {}

    def resolve() -> None:
        try:
            outcome["found"] = socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=resolve, daemon=True, name="resolve MASTER_ADDR")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return f"MASTER_ADDR={address!r} did not resolve within {timeout:g} s; set it to a reachable host or address"
    if "error" in outcome:
        exc = outcome["error"]
        reason = getattr(exc, "strerror", None) or str(exc)
        return f"MASTER_ADDR={address!r} does not resolve ({reason}); set it to a reachable host or address"
    return None


def port_problem(port: int) -> str | None:
    """Why the rendezvous port cannot be bound on this host, or None (checked on node 0, which binds it)."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 here
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers are no conflict
            if family == socket.AF_INET6:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind((address, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return (f"MASTER_PORT={port} is already in use on this host (another job or service listens "
                            "there); set MASTER_PORT to a free port")
                if exc.errno == errno.EADDRNOTAVAIL:
                    continue
                return f"MASTER_PORT={port} cannot be bound on this host: {exc.strerror or exc}"
    return None


def wait_for_port(port: int, seconds: float = PORT_WAIT_SECONDS, poll: float = 0.2) -> str | None:
    """None once ``port`` can be bound; the last problem when it still cannot after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        problem = port_problem(port)
        if problem is None or time.monotonic() >= deadline:
            return problem if problem is None else f"{problem} (waited {seconds:g} s for it to be freed)"
        time.sleep(poll)


# argparse type: a wait of 0 to 600 seconds (a wait is bounded; the comparison also refuses nan)
seconds_argument = number_argument(float, "a number of seconds", lambda value: 0 <= value <= 600,
                                   "{text!r}: must be between 0 and 600 seconds")


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.machine.rendezvous", description=__doc__.split("\n\n")[0],
                                     epilog="Exit status: 0 usable, 2 one line saying why not (or a config error).")
    parser.add_argument("--wait", type=seconds_argument, default=0.0, metavar="SECONDS",
                        help="wait up to SECONDS for MASTER_PORT to be freed (default 0: check once)")
    args = parser.parse_args(argv)

    cfg = load_config()
    problem = resolve_problem(cfg.master_addr)
    if problem is None and cfg.node_rank == 0:
        problem = wait_for_port(cfg.master_port, args.wait)
    if problem:
        print(f"rendezvous: {problem}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
