"""``with step("veth r1/eth0 - r2/eth0"):``: any failure inside becomes a :class:`RealizeError`
that names the object being made (the caller rolls back)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from ..errors import RealizeError, SfclabError


@contextlib.contextmanager
def step(obj: str) -> Iterator[None]:
    """Turn any failure inside into a :class:`RealizeError` naming ``obj``."""
    try:
        yield
    except SfclabError as e:
        if isinstance(e, RealizeError):
            raise
        raise RealizeError(str(e), obj=obj) from e
    except OSError as e:
        raise RealizeError(e.strerror or str(e), obj=obj, errno=e.errno) from e
    except Exception as e:
        code = getattr(e, "code", None)  # pyroute2's NetlinkError carries the errno
        if type(e).__name__ == "NetlinkError" and isinstance(code, int) and code > 0:
            raise RealizeError(os.strerror(code), obj=obj, errno=code) from e
        raise RealizeError(f"{type(e).__name__}: {e}", obj=obj) from e
