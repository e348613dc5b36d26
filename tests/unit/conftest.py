"""Fixtures the unit tests share."""

from __future__ import annotations

import pytest

from sfclab.realize.kinds import load_lab


@pytest.fixture
def ssh_lab(tmp_path):
    """Lab ``far`` of a lab file: a on host h1, b on host h2 (each reached over SSH, its key a
    file of the lab's folder), a link between them."""
    (tmp_path / "id").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n(first line only)\n"
                                 "-----END OPENSSH PRIVATE KEY-----\n")
    f = tmp_path / "lab.yaml"
    f.write_text("name: far\nhosts:\n"
                 "  h1: {address: 198.19.255.1, ssh: {key: id}}\n"
                 "  h2: {address: 198.19.255.2, ssh: {key: id}}\n"
                 "nodes:\n  a: {kind: host, host: h1}\n  b: {kind: host, host: h2}\n"
                 "links:\n  - endpoints: [a, b]\n")
    return load_lab(str(f))
