"""The API in process (FastAPI's TestClient) as a program on this machine calls it: with the
server's token, naming the address the server listens on (``Host: 127.0.0.1:8470``)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

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
