"""A Kubernetes API client: a kubeconfig read, and JSON requests over HTTPS with its credentials.

**Why not the ``kubernetes`` package.**  sfclab asks an API server for a handful of things: get,
list, create, server-side apply and delete of a few resource kinds, and a TokenRequest in the
tests.  Each is one HTTPS request whose path is ``/api/v1/...`` or ``/apis/GROUP/VERSION/...``
with a JSON body.  The ``kubernetes`` package would bring a generated client of every API
(tens of megabytes) and its own dependencies (urllib3, google-auth, websocket-client,
requests-oauthlib, ...), each to be pinned, for requests that ``http.client`` makes in a few
lines.  So this module speaks HTTPS itself, with the kubeconfig's CA and credentials.

**What a kubeconfig may hold here.**  The context (``--context``, else ``current-context``)
names a cluster (``server``: an ``https://`` URL; ``certificate-authority`` or
``certificate-authority-data``; ``insecure-skip-tls-verify``) and a user (``token``,
``tokenFile``, or ``client-certificate``/``client-key`` and their ``-data`` forms).  An
``exec`` or ``auth-provider`` user (a cloud's login plug-in) is refused by name: sfclab runs no
program a kubeconfig names.  The file is bounded (:data:`MAX_KUBECONFIG`) before it is parsed,
and every answer (:data:`MAX_ANSWER`) before it is read.

**Errors.**  A server that does not answer (refused, timed out, TLS failed) raises
:class:`~sfclab.errors.ClusterUnreachable` (exit 1); one that answers no -- 401, 403, 422, or
a kubeconfig it cannot be asked with -- raises :class:`~sfclab.errors.ClusterRefused` (exit 2);
each names the server, the verb and the path, and the server's own message.  404 and 409 are
:class:`NotFound` and :class:`Conflict` (refusals too), for callers that expect them.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import yaml

from ...errors import ClusterRefused, ClusterUnreachable

#: the largest kubeconfig read (bytes)
MAX_KUBECONFIG = 1 << 20
#: the largest answer read from the API server (bytes)
MAX_ANSWER = 16 << 20
#: where a Pod finds its ServiceAccount's token and the cluster's CA
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: seconds a request may take
TIMEOUT = 10.0


class NotFound(ClusterRefused):
    """The object asked for does not exist (404)."""


class Conflict(ClusterRefused):
    """The object exists already, or changed meanwhile (409)."""


class Gone(ClusterRefused):
    """A watch's resource version is older than the API server keeps (410): list again."""


@dataclass(frozen=True)
class KubeConfig:
    """One context of a kubeconfig, resolved: where the server is and how to prove who we are."""

    source: str  # the kubeconfig's path, for messages
    context: str
    server: str  # https://host:port
    ca_pem: bytes | None = None
    insecure: bool = False
    token: str | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    namespace: str = "default"

    @classmethod
    def load(cls, path: str | None = None, context: str | None = None) -> KubeConfig:
        """The kubeconfig at ``path`` (else ``$KUBECONFIG``'s first file, else
        ``~/.kube/config``), context ``context`` (else its current one)."""
        where = path or (os.environ.get("KUBECONFIG") or "").split(":")[0] or \
            str(Path.home() / ".kube" / "config")
        try:
            with open(where, "rb") as f:
                raw = f.read(MAX_KUBECONFIG + 1)
        except OSError as e:
            raise ClusterRefused(f"kubeconfig {where}: cannot be read: {e.strerror}") from e
        if len(raw) > MAX_KUBECONFIG:
            raise ClusterRefused(f"kubeconfig {where}: larger than {MAX_KUBECONFIG} bytes")
        try:
            doc = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ClusterRefused(f"kubeconfig {where}: not YAML: {e}") from e
        return cls.parse(doc, where, context)

    @classmethod
    def in_cluster(cls, root: Path = SERVICE_ACCOUNT) -> KubeConfig:
        """Inside a Pod: its ServiceAccount's token and the cluster's CA (``root``), the API
        server from ``KUBERNETES_SERVICE_HOST``/``_PORT``."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise ClusterRefused("in-cluster: KUBERNETES_SERVICE_HOST is not set (not in a Pod)")
        try:
            token = (root / "token").read_text().strip()
            ca = (root / "ca.crt").read_bytes()
        except OSError as e:
            raise ClusterRefused(f"in-cluster: {e.filename}: {e.strerror}") from e
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return cls(source="in-cluster", context="in-cluster", server=server, ca_pem=ca,
                   token=token, namespace=(root / "namespace").read_text().strip()
                   if (root / "namespace").exists() else "default")

    @classmethod
    def parse(cls, doc: Any, where: str, context: str | None = None) -> KubeConfig:
        def bad(what: str) -> ClusterRefused:
            return ClusterRefused(f"kubeconfig {where}: {what}")

        if not isinstance(doc, dict):
            raise bad("expected a mapping with clusters, users and contexts")

        def named(section: str, name: Any) -> dict[str, Any]:
            for item in doc.get(section) or []:
                if isinstance(item, dict) and item.get("name") == name:
                    inner = item.get(section[:-1])
                    if isinstance(inner, dict):
                        return inner
                    raise bad(f"{section} {name!r}: expected a mapping")
            raise bad(f"no {section[:-1]} named {name!r}")

        ctx_name = context or doc.get("current-context")
        if not ctx_name:
            raise bad("no context given (--context) and no current-context")
        ctx = named("contexts", ctx_name)
        cluster = named("clusters", ctx.get("cluster"))
        user = named("users", ctx.get("user")) if ctx.get("user") else {}
        base = Path(where).parent

        def blob(d: dict[str, Any], key: str) -> bytes | None:
            if d.get(f"{key}-data"):
                try:
                    return base64.b64decode(d[f"{key}-data"], validate=True)
                except (ValueError, TypeError) as e:
                    raise bad(f"{key}-data: not base64") from e
            if d.get(key):
                try:
                    return (base / str(d[key])).read_bytes()
                except OSError as e:
                    raise bad(f"{key} {d[key]}: {e.strerror}") from e
            return None

        server = str(cluster.get("server") or "")
        if urlsplit(server).scheme != "https" or not urlsplit(server).hostname:
            raise bad(f"cluster {ctx.get('cluster')!r}: server {server!r} is not an https:// URL")
        for plugin in ("exec", "auth-provider"):
            if plugin in user:
                raise bad(f"user {ctx.get('user')!r}: '{plugin}' credentials are not supported "
                          f"(sfclab runs no program a kubeconfig names): use a token or a "
                          f"client certificate")
        token = user.get("token")
        if not token and user.get("tokenFile"):
            try:
                token = (base / str(user["tokenFile"])).read_text().strip()
            except OSError as e:
                raise bad(f"tokenFile {user['tokenFile']}: {e.strerror}") from e
        return cls(source=where, context=str(ctx_name), server=server.rstrip("/"),
                   ca_pem=blob(cluster, "certificate-authority"),
                   insecure=bool(cluster.get("insecure-skip-tls-verify")),
                   token=str(token) if token else None,
                   cert_pem=blob(user, "client-certificate"), key_pem=blob(user, "client-key"),
                   namespace=str(ctx.get("namespace") or "default"))


def unreachable(what: str, e: BaseException) -> ClusterUnreachable:
    """A request that got no answer (refused, timed out, TLS failed, cut) as one line."""
    if isinstance(e, ssl.SSLError):
        return ClusterUnreachable(f"{what}: TLS failed: {e.reason or e}")
    why = "timed out" if isinstance(e, socket.timeout) else \
        (e.strerror or str(e)) if isinstance(e, OSError) else str(e) or type(e).__name__
    return ClusterUnreachable(f"{what}: not reachable: {why}")


def _judged(what: str, answer: http.client.HTTPResponse, raw: bytes) -> dict[str, Any]:
    """The answer's JSON object; its refusal (status 400 and up) raised, typed."""
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        doc = {"message": raw[:200].decode("utf-8", "replace")}
    if answer.status >= 400:
        said = doc.get("message") if isinstance(doc, dict) else None
        text = f"{what}: {answer.status} {answer.reason}: {said or '(no message)'}"
        kind = {404: NotFound, 409: Conflict, 410: Gone}.get(answer.status, ClusterRefused)
        raise kind(text, status=answer.status)
    return doc if isinstance(doc, dict) else {}


def cluster_arguments(p: Any) -> None:
    """The options by which a program of sfclab's on a cluster (the agent, the controller)
    reaches it: ``--kubeconfig F [--context C]``, or ``--in-cluster`` (in a Pod)."""
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.add_argument("--in-cluster", action="store_true",
                   help="the Pod's own ServiceAccount token and the cluster's address")


def serve(who: str, a: Any, start: Any) -> int:
    """Run a program of sfclab's on a cluster until SIGTERM or SIGINT (exit 0): ``start(api,
    say, stop)`` with the client of its options (:func:`cluster_arguments`), a printer of its
    lines (on stderr, each prefixed with ``who``) and the event set on those signals; 1 with
    its one line when the cluster refuses it (or a kubeconfig cannot be read)."""
    import signal
    import sys
    from threading import Event

    from ...errors import SfclabError

    stop = Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        config = KubeConfig.in_cluster() if a.in_cluster else \
            KubeConfig.load(a.kubeconfig, a.context)
        start(KubeApi(config), lambda m: print(f"{who}: {m}", file=sys.stderr, flush=True),
              stop)
    except SfclabError as e:
        print(f"{who}: {e}", file=sys.stderr)
        return 1
    return 0


def resource_path(group_version: str, plural: str, namespace: str | None = None,
                  name: str | None = None, sub: str | None = None) -> str:
    """The API path of a collection or an object: ``/api/v1/...`` for the core group,
    ``/apis/GROUP/VERSION/...`` otherwise."""
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    parts = [root] + ([f"namespaces/{quote(namespace, safe='')}"] if namespace else []) + [plural]
    if name is not None:
        parts.append(quote(name, safe=""))
    if sub is not None:
        parts.append(sub)
    return "/".join(parts)


class KubeApi:
    """Requests to the API server of ``config``; one TLS context, a connection per request."""

    def __init__(self, config: KubeConfig, timeout: float = TIMEOUT):
        self.config = config
        self.timeout = timeout
        self._tls = self._context()

    def _context(self) -> ssl.SSLContext:
        c = self.config
        tls = ssl.create_default_context()
        if c.insecure:
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        elif c.ca_pem is not None:
            tls.load_verify_locations(cadata=c.ca_pem.decode("ascii", "replace"))
        if c.cert_pem is not None and c.key_pem is not None:
            # ssl loads a client certificate only from files: written to private temp files
            with tempfile.TemporaryDirectory() as d:
                cert, key = Path(d, "cert.pem"), Path(d, "key.pem")
                cert.write_bytes(c.cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(c.key_pem)
                try:
                    tls.load_cert_chain(cert, key)
                except ssl.SSLError as e:
                    raise ClusterRefused(f"kubeconfig {c.source}: client certificate: "
                                         f"{e.reason}") from e
        return tls

    def _send(self, method: str, target: str, body: Any, content_type: str,
              timeout: float) -> tuple[http.client.HTTPSConnection,
                                       http.client.HTTPResponse]:
        """The connection and the answer's head of ``method`` ``target`` (the caller reads
        the body and closes the connection)."""
        url = urlsplit(self.config.server)
        headers = {"Accept": "application/json", "User-Agent": "sfclab"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        conn = http.client.HTTPSConnection(url.hostname or "", url.port or 443,
                                           timeout=timeout, context=self._tls)
        conn.request(method, target, body=data, headers=headers)
        return conn, conn.getresponse()

    def request(self, method: str, path: str, body: Any = None, *,
                query: dict[str, str] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
        """``method`` ``path`` with ``body`` as JSON; the answer's JSON object."""
        target = path + ("?" + urlencode(query) if query else "")
        what = f"{self.config.server}: {method} {path}"
        conn = None
        try:
            conn, answer = self._send(method, target, body, content_type, self.timeout)
            raw = answer.read(MAX_ANSWER + 1)
        except (OSError, http.client.HTTPException) as e:
            raise unreachable(what, e) from e
        finally:
            if conn is not None:
                conn.close()
        if len(raw) > MAX_ANSWER:
            raise ClusterUnreachable(f"{what}: answer larger than {MAX_ANSWER} bytes")
        return _judged(what, answer, raw)

    def watch(self, path: str, resource_version: str, *, selector: str | None = None,
              fields: str | None = None, seconds: int = 30
              ) -> Iterator[tuple[str, dict[str, Any]]]:
        """The changes of collection ``path`` after ``resource_version`` (its list's), as
        ``(type, object)`` (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``), until the API
        server ends the watch after ``seconds``; ``selector``/``fields``: label and field
        selectors.  :class:`Gone` when that version is older than the server keeps (list
        again)."""
        query = {"watch": "1", "resourceVersion": resource_version,
                 "timeoutSeconds": str(seconds), "allowWatchBookmarks": "true"}
        if selector:
            query["labelSelector"] = selector
        if fields:
            query["fieldSelector"] = fields
        what = f"{self.config.server}: WATCH {path}"
        conn = None
        try:
            conn, answer = self._send("GET", f"{path}?{urlencode(query)}", None, "",
                                      self.timeout + seconds)
            if answer.status >= 400:
                _judged(what, answer, answer.read(MAX_ANSWER + 1))
            while True:
                line = answer.readline(MAX_ANSWER + 1)
                if not line:
                    return
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    kind = Gone if obj.get("code") == 410 else ClusterRefused
                    raise kind(f"{what}: {obj.get('code')} {obj.get('message')}",
                               status=int(obj.get("code") or 500))
                yield str(event.get("type")), obj
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise unreachable(what, e) from e
        finally:
            if conn is not None:
                conn.close()

    # --- the verbs sfclab uses -------------------------------------------------------------
    def merge(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of the object (or subresource) at ``path``."""
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def items(self, path: str, selector: str | None = None) -> list[dict[str, Any]]:
        """The objects of collection ``path`` (``selector``: a label selector)."""
        doc = self.request("GET", path, query={"labelSelector": selector} if selector else None)
        return [i for i in doc.get("items") or [] if isinstance(i, dict)]

    def create(self, path: str, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        return self.request("POST", path, obj, query={"dryRun": "All"} if dry_run else None)

    def apply(self, path: str, obj: dict[str, Any], *, manager: str = "sfclab",
              dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply of ``obj`` at its object path ``path`` (created or updated)."""
        query = {"fieldManager": manager, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request("PATCH", path, obj, query=query,
                            content_type="application/apply-patch+yaml")

    def delete(self, path: str) -> bool:
        """Delete the object at ``path``; ``False`` when it was not there."""
        try:
            self.request("DELETE", path)
        except NotFound:
            return False
        return True
