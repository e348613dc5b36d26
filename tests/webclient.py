"""The API in process (FastAPI's TestClient) as a program on this machine calls it: with the
server's token, naming the address the server listens on (``Host: 127.0.0.1:8470``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from fastapi import FastAPI
from fastapi.testclient import TestClient

from sfclab.realize.kinds import load_lab
from sfclab.realize.lifecycle import plan_for
from sfclab.realize.state import LabState
from sfclab.web.app import create_app
from sfclab.web.guard import Origins

TOKEN = "t0ken-for-the-tests-0123456789"
ORIGINS = Origins("127.0.0.1", 8470)
BASE = "http://127.0.0.1:8470"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
YAML = {"content-type": "application/yaml"}


def make_app(**kw: Any) -> FastAPI:
    return create_app(TOKEN, ORIGINS, **kw)


def api_client(app: FastAPI | None = None, *, token: bool = True, **kw: Any) -> TestClient:
    """A client of ``app`` (default: a new application made with ``kw``), sending the token
    unless ``token`` is False."""
    return TestClient(app or make_app(**kw), base_url=BASE, headers=AUTH if token else {},
                      raise_server_exceptions=False)


def fake_up(path: Path, status: str = "up") -> str:
    """Write a lab's state as ``up`` does (plan, expanded file, meta), making nothing."""
    lab = load_lab(str(path))
    st = LabState(lab.name)
    st.begin(plan_for(lab).to_dict(), yaml.safe_dump(lab.to_dict()), str(path))
    st.set_meta(status=status)
    return lab.name
