"""eBPF maps through the bpf(2) system call: open a pinned map, read, write, write many at once.

Loading and attaching programs is the native loader's job (``native/build/sfc-steer``, libbpf);
everything sfclab does afterwards to a running data plane -- filling tables, adding classifier
entries, reading counters -- goes through :class:`PinnedMap` here, without a process per entry.
Per-CPU maps read as one value per possible CPU.  Errors are :class:`~sfclab.errors.RealizeError`
naming the map and the operation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from collections.abc import Iterator
from functools import cache
from typing import Self

from ..errors import RealizeError

#: the bpf(2) system call's number, by machine
_NR_BPF = {"x86_64": 321, "aarch64": 280}
_OBJ_GET, _MAP_LOOKUP, _MAP_UPDATE, _MAP_DELETE, _MAP_NEXT_KEY = 7, 1, 2, 3, 4
_OBJ_INFO, _MAP_LOOKUP_BATCH, _MAP_UPDATE_BATCH = 15, 24, 26
_PERCPU_TYPES = {5, 6, 10}  # PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH
BPF_ANY, BPF_NOEXIST, BPF_EXIST = 0, 1, 2


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


@cache
def possible_cpus() -> int:
    """How many CPUs the kernel may ever bring up (the per-CPU value count)."""
    text = open("/sys/devices/system/cpu/possible").read().strip()
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    nr = _NR_BPF.get(platform.machine())
    if nr is None:
        raise RealizeError(f"no bpf(2) system call number known for {platform.machine()}")
    ret: int = _libc().syscall(nr, cmd, attr, len(attr))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def _attr(u32: dict[int, int] | None = None,
          u64: dict[int, int] | None = None) -> ctypes.Array[ctypes.c_char]:
    """A ``union bpf_attr``: 32- and 64-bit fields by byte offset, the rest zero."""
    attr = ctypes.create_string_buffer(128)
    for off, v in (u32 or {}).items():
        ctypes.c_uint32.from_buffer(attr, off).value = v
    for off, v in (u64 or {}).items():
        ctypes.c_uint64.from_buffer(attr, off).value = v
    return attr


def _u64(buf: ctypes.Array[ctypes.c_char] | bytes | None) -> int:
    return ctypes.addressof(buf) if isinstance(buf, ctypes.Array) else 0


class PinnedMap:
    """A map pinned in bpffs, opened by path; use as a context manager (closes the fd)."""

    def __init__(self, path: str):
        self.path = path
        name = ctypes.create_string_buffer(path.encode())
        try:
            self.fd = _bpf(_OBJ_GET, _attr(u64={0: ctypes.addressof(name)}))
        except OSError as e:
            raise RealizeError(f"cannot open map: {e.strerror}", obj=path) from None
        info = ctypes.create_string_buffer(88)
        try:
            _bpf(_OBJ_INFO, _attr(u32={0: self.fd, 4: len(info)},
                                  u64={8: ctypes.addressof(info)}))
        except OSError as e:
            os.close(self.fd)
            raise RealizeError(f"cannot read map info: {e.strerror}", obj=path) from None
        u32 = [ctypes.c_uint32.from_buffer(info, 4 * i).value for i in range(6)]
        self.type, self.key_size, self.value_size, self.max_entries = u32[0], u32[2], u32[3], u32[4]
        self.percpu = self.type in _PERCPU_TYPES
        #: bytes of one lookup's value: one 8-aligned slot per possible CPU for per-CPU maps
        self.value_bytes = ((self.value_size + 7) // 8 * 8 * possible_cpus() if self.percpu
                            else self.value_size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- single elements ----------------------------------------------------------------------
    def _elem(self, cmd: int, key: bytes, value: ctypes.Array[ctypes.c_char] | None,
              flags: int = 0) -> None:
        if len(key) != self.key_size:
            raise RealizeError(f"key of {len(key)} bytes, the map's are {self.key_size}",
                               obj=self.path)
        k = ctypes.create_string_buffer(key, len(key))
        _bpf(cmd, _attr(u32={0: self.fd},
                        u64={8: ctypes.addressof(k), 16: _u64(value), 24: flags}))

    def lookup(self, key: bytes) -> bytes | None:
        """The value under ``key`` (per-CPU maps: every CPU's slot, concatenated), or None."""
        v = ctypes.create_string_buffer(self.value_bytes)
        try:
            self._elem(_MAP_LOOKUP, key, v)
        except OSError as e:
            if e.errno == 2:
                return None
            raise RealizeError(f"lookup failed: {e.strerror}", obj=self.path) from None
        return v.raw

    def update(self, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
        if len(value) != self.value_bytes:
            raise RealizeError(f"value of {len(value)} bytes, the map's are {self.value_bytes}",
                               obj=self.path)
        v = ctypes.create_string_buffer(value, len(value))
        try:
            self._elem(_MAP_UPDATE, key, v, flags)
        except OSError as e:
            raise RealizeError(f"update failed: {e.strerror}", obj=self.path) from None

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; False if it was not there."""
        try:
            self._elem(_MAP_DELETE, key, None)
        except OSError as e:
            if e.errno == 2:
                return False
            raise RealizeError(f"delete failed: {e.strerror}", obj=self.path) from None
        return True

    def keys(self) -> Iterator[bytes]:
        """Every key (hash maps: in the kernel's order; arrays: 0 .. max_entries-1)."""
        cur: bytes | None = None
        while True:
            k = ctypes.create_string_buffer(cur, self.key_size) if cur is not None else None
            nxt = ctypes.create_string_buffer(self.key_size)
            try:
                _bpf(_MAP_NEXT_KEY, _attr(u32={0: self.fd},
                                          u64={8: _u64(k), 16: ctypes.addressof(nxt)}))
            except OSError as e:
                if e.errno == 2:
                    return
                raise RealizeError(f"key walk failed: {e.strerror}", obj=self.path) from None
            cur = nxt.raw
            yield cur

    # --- many at once -------------------------------------------------------------------------
    def update_batch(self, items: list[tuple[bytes, bytes]], flags: int = BPF_ANY,
                     chunk: int = 65536) -> None:
        """Write every (key, value) pair, ``chunk`` per system call."""
        for start in range(0, len(items), chunk):
            part = items[start:start + chunk]
            keys = ctypes.create_string_buffer(b"".join(k for k, _ in part))
            values = ctypes.create_string_buffer(b"".join(v for _, v in part))
            if len(keys) - 1 != len(part) * self.key_size or \
                    len(values) - 1 != len(part) * self.value_bytes:
                raise RealizeError("batch of keys or values of the wrong size", obj=self.path)
            attr = _attr(u32={32: len(part), 36: self.fd},
                         u64={16: ctypes.addressof(keys), 24: ctypes.addressof(values), 40: flags})
            try:
                _bpf(_MAP_UPDATE_BATCH, attr)
            except OSError as e:
                done = ctypes.c_uint32.from_buffer(attr, 32).value
                raise RealizeError(f"batch update failed after {start + done} of {len(items)} "
                                   f"entries: {e.strerror}", obj=self.path) from None

    def items(self, chunk: int = 65536) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of a hash map, ``chunk`` per system call (BPF_MAP_LOOKUP_BATCH):
        a whole classifier table in a few calls where :meth:`keys` takes one per entry."""
        keys = ctypes.create_string_buffer(chunk * self.key_size)
        values = ctypes.create_string_buffer(chunk * self.value_bytes)
        token_in = ctypes.create_string_buffer(max(self.key_size, 8))
        token_out = ctypes.create_string_buffer(max(self.key_size, 8))
        first = True
        while True:
            attr = _attr(u32={32: chunk, 36: self.fd},
                         u64={0: 0 if first else ctypes.addressof(token_in),
                              8: ctypes.addressof(token_out), 16: ctypes.addressof(keys),
                              24: ctypes.addressof(values)})
            done = False
            try:
                _bpf(_MAP_LOOKUP_BATCH, attr)
            except OSError as e:
                if e.errno != 2:  # ENOENT: this was the last part
                    raise RealizeError(f"batch lookup failed: {e.strerror}",
                                       obj=self.path) from None
                done = True
            n = ctypes.c_uint32.from_buffer(attr, 32).value
            kraw, vraw = keys.raw, values.raw
            ks, vs = self.key_size, self.value_bytes
            for i in range(n):
                yield kraw[i * ks:(i + 1) * ks], vraw[i * vs:(i + 1) * vs]
            if done:
                return
            ctypes.memmove(token_in, token_out, len(token_out))
            first = False

    def percpu_sum_u64(self, key: bytes) -> int:
        """A per-CPU map's u64 value under ``key``, summed over CPUs (0 if absent)."""
        raw = self.lookup(key)
        if raw is None:
            return 0
        step = (self.value_size + 7) // 8 * 8
        return sum(int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), step))


def mount_bpffs(path: str) -> None:
    """Mount a bpf filesystem at ``path`` (where pins live)."""
    ret = _libc().mount(b"bpf", path.encode(), b"bpf", 0, None)
    if ret != 0:
        err = ctypes.get_errno()
        raise RealizeError(f"cannot mount bpffs: {os.strerror(err)}", obj=path)
