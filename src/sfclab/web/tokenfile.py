"""The server's token file: read with its owner and mode checked, or made once and reused.

``serve`` always requires a token.  Without ``--token-file`` it uses ``serve.token`` in the
state directory (``$SFCLAB_STATE_DIR``, default ``/run/sfclab``), made at the first start with
a random token (:func:`ensure`) and read again at later starts.  Whichever file it is, it must
be a regular file owned by the server's user and neither readable nor writable by group or
others (mode 0600 or stricter): anyone who can read it can do what the server can (build labs
that run programs as root), and anyone who can write it can choose the token.  It is read at
most :data:`MAX_BYTES` bytes, so ``--token-file /dev/zero`` is refused at once (not a regular
file) and a huge file is refused after 4 KiB.

Every refusal is bad input (:class:`~sfclab.errors.SpecError`) at ``--token-file``, naming the
file and what was expected.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from ..errors import SpecError
from ..realize.state import state_root

#: a token file holds one token: more than this is not one
MAX_BYTES = 4096
MIN_TOKEN = 16
NAME = "serve.token"
PLACE = "--token-file"


def default_path() -> Path:
    return state_root() / NAME


def _refuse(path: str | Path, expected: str, hint: str = "") -> SpecError:
    return SpecError(f"expected {expected}, got {str(path)!r}{hint}", place=PLACE)


def read(path: str | Path) -> str:
    """The token in ``path`` (surrounding white space removed), after checking what the file is,
    who owns it and who may read or write it."""
    try:
        # O_NONBLOCK: a FIFO or a device must not hang the open; the checks below refuse them
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise _refuse(path, f"a readable file holding the token ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "a regular file holding the token")
        if st.st_uid != os.geteuid():
            raise _refuse(path, f"a token file owned by the server's user (uid {os.geteuid()}), "
                          f"not by uid {st.st_uid}")
        if st.st_mode & 0o077:
            raise _refuse(path, f"a token file only its owner can read and write (mode 0600), "
                          f"not mode {stat.S_IMODE(st.st_mode):04o}", f" (chmod 600 {path})")
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise _refuse(path, f"a token file of at most {MAX_BYTES} bytes")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _refuse(path, "a token file of UTF-8 text") from None
    if len(token) < MIN_TOKEN or any(c.isspace() for c in token):
        raise _refuse(path, f"a token of at least {MIN_TOKEN} characters without spaces")
    return token


def ensure(path: Path) -> tuple[str, bool]:
    """The token in ``path``, making the file first with a new random token when there is none
    (written to a private temporary file, then linked into place, so a reader never sees half
    a token and two servers starting together agree on one).  Returns (token, made)."""
    if os.path.lexists(path):
        return read(path), False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
    except OSError as e:
        raise _refuse(path, f"a state directory where the token file can be made "
                      f"({e.strerror})") from None
    made = True
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:  # another server made it meanwhile: use that one
            made = False
    finally:
        os.unlink(tmp)
    return read(path), made
