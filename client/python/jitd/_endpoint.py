"""Endpoints and the admin token file, exactly as the C++ client reads them
(client/src/endpoint.cpp, client/src/admin_token.cpp), so that Python, jitctl
and the daemon always agree on where the daemon is and who is admin."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from .errors import InvalidArgument, NotFound


def _home() -> str:
    # $HOME, or the password database's home where HOME is unset (systemd
    # services, containers started with env -i).
    home = os.environ.get("HOME", "")
    if home:
        return home
    try:
        return pwd.getpwuid(os.getuid()).pw_dir or "/tmp"
    except KeyError:
        return "/tmp"


def default_endpoint() -> str:
    """Where a daemon started without --listen listens:

    ``unix:$XDG_RUNTIME_DIR/jitd.sock`` when XDG_RUNTIME_DIR is set, else
    ``unix:$XDG_CACHE_HOME/jitd/jitd.sock`` when XDG_CACHE_HOME is set, else
    ``unix:$HOME/.cache/jitd/jitd.sock``. Depends on the environment only.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime:
        return f"unix:{runtime}/jitd.sock"
    cache_home = os.environ.get("XDG_CACHE_HOME", "") or _home() + "/.cache"
    return f"unix:{cache_home}/jitd/jitd.sock"


def resolve_endpoint(endpoint: str | None = None) -> str:
    """``endpoint`` when given and non-empty, else ``$JITD_ENDPOINT`` when set
    and non-empty, else :func:`default_endpoint`."""
    if endpoint:
        return endpoint
    return os.environ.get("JITD_ENDPOINT", "") or default_endpoint()


def validate_endpoint(endpoint: str) -> None:
    """Raises :class:`jitd.InvalidArgument` unless ``endpoint`` is
    ``unix:PATH`` or ``HOST:PORT`` (``[::1]:7070`` for IPv6 literals, which
    always go in brackets; PORT is digits, 1..65535). The C++ rule is
    jitd/base/endpoint.h; tests/vectors/endpoints.tsv holds the cases both
    are tested against."""
    if endpoint.startswith("unix:"):
        if len(endpoint) == 5:
            raise InvalidArgument(f"endpoint '{endpoint}' names no socket path (expected unix:PATH)")
        return
    why = _split_host_port(endpoint)
    if isinstance(why, str):
        # A bare socket path is the usual slip: say what it should read.
        path = endpoint.startswith(("/", "./", "~")) or endpoint.endswith(".sock")
        raise InvalidArgument(f"endpoint '{endpoint}' is neither unix:PATH nor HOST:PORT ({why})"
                              + (f"; did you mean unix:{endpoint}?" if path else ""))
    port = why[1]
    if not (0 < len(port) <= 5 and all("0" <= c <= "9" for c in port) and 0 < int(port) <= 65535):
        raise InvalidArgument(f"endpoint '{endpoint}' has no valid port (expected HOST:PORT, PORT in 1..65535)")


def _split_host_port(text: str) -> tuple[str, str] | str:
    """(host, port text), or what is wrong with ``text`` as HOST:PORT."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            return "no ] after the IPv6 address"
        if close + 1 >= len(text) or text[close + 1] != ":":
            return "expected [IPV6]:PORT"
        host = text[1:close]
        if not host:
            return "the host is empty"
        if ":" not in host:
            return "brackets are for IPv6 addresses only"
        return host, text[close + 2:]
    colon = text.rfind(":")
    if colon < 0:
        return "expected HOST:PORT"
    host = text[:colon]
    if not host:
        return "the host is empty"
    if ":" in host:
        return "an IPv6 address goes in brackets, as in [::1]:7070"
    return host, text[colon + 1:]


def read_admin_token_file(path: str | os.PathLike[str]) -> str:
    """The token in an admin token file: its content without surrounding
    whitespace. :class:`jitd.NotFound` when the file cannot be read,
    :class:`jitd.InvalidArgument` when it holds no token or whitespace or
    control characters inside one (no Bearer header can carry those)."""
    try:
        content = Path(path).read_bytes()
    except OSError as error:
        raise NotFound(f"cannot read admin token file {path}: {error.strerror}") from None
    token = content.strip(b" \t\n\v\f\r")
    if not token:
        raise InvalidArgument(f"admin token file {path} holds no token")
    if any(byte <= 0x20 or byte >= 0x7F for byte in token):
        raise InvalidArgument(
            f"admin token file {path} holds whitespace or control characters inside its token; "
            "use one line of printable text"
        )
    return token.decode("ascii")


def socket_admin_token(endpoint: str) -> str | None:
    """The token a daemon without --admin-token-file writes beside its socket
    (``SOCKET.admin-token``, readable by the daemon's user only), when this
    process can read it; None otherwise (other users are not admin)."""
    if not endpoint.startswith("unix:"):
        return None
    socket_path = endpoint[5:]
    path = socket_path + ".admin-token"
    # Only a regular file, not through a symlink, owned by the socket's
    # owner: one planted beside a fake server's socket is not read.
    try:
        socket_owner = os.stat(socket_path).st_uid
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != socket_owner or info.st_size > 4096:
            return None
        content = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    token = content.strip(b" \t\n\v\f\r")
    if not token or any(byte <= 0x20 or byte >= 0x7F for byte in token):
        return None
    return token.decode("ascii")
