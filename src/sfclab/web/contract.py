"""The API's contract in its OpenAPI document: the error body, the statuses each route answers,
the request bodies' schemas, and how a client authenticates.

- :class:`ErrorBody` is the one body of every status >= 400 (``{"error", "type"}``, plus the
  file, place, line and column of bad input).
- :func:`answers` names the error statuses a route declares; :data:`ALWAYS` holds those every
  route can answer (401 without the token, 403 from another origin, 422 for a bad parameter,
  500 for a bug), :data:`WITH_BODY` those of a route that takes a body (413 too large, 415 the
  wrong Content-Type).
- :func:`lab_file_schema` is the lab file's JSON schema, built from the lab file's own model and
  each node kind's parameter model in the kind table, so it follows the kinds as they are
  added.  It says what a lab file must look like; what it cannot say (a link naming a node
  that does not exist, an address outside the pool) is still 422, with the place.
- :func:`measurement_schema` and :func:`chain_file_schema` do the same for a measurement
  request and a chain file.
- :func:`secure` adds the two ways to present the token (``Authorization: Bearer``, the
  page's cookie) to the document, as required by every operation.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Path, Query
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from ..realize.kinds import TABLE
from ..spec.chainfile import ChainFile
from ..spec.lab import NODE_IMAGE_KEY, NODE_PLACEMENT_KEYS, LabFile
from ..spec.measurement import MODELS
from ..spec.names import LAB_NAME_MAX, NAME_RE, NODE_NAME_MAX

#: the name rule of labs, nodes, chains and hosts, as a JSON-schema pattern (checked by
#: pydantic, whose ``$`` is the end of the text as in JSON Schema's ECMA dialect: no trailing
#: newline slips through; Python's own spelling of that, ``\Z``, neither of them knows)
NAME_PATTERN = NAME_RE.pattern.replace(r"\Z", "$")
LabName = Annotated[str, Path(pattern=NAME_PATTERN, min_length=1, max_length=LAB_NAME_MAX,
                              description="a lab's name")]
ChainName = Annotated[str, Path(pattern=NAME_PATTERN, min_length=1, max_length=NODE_NAME_MAX,
                                description="a chain's name")]
HostName = Annotated[str, Path(pattern=NAME_PATTERN, min_length=1, max_length=NODE_NAME_MAX,
                               description="a host's name")]
#: the longest a change waits for another command on the lab before 409
MAX_WAIT_S = 300.0
Wait = Annotated[float, Query(ge=0, le=MAX_WAIT_S, description="seconds to wait for another "
                              "command on the lab before answering 409")]


class ErrorBody(BaseModel):
    """What went wrong, in the command line's words."""

    error: str = Field(description="the whole message, as the command line prints it")
    type: str = Field(description="the kind of error (SpecError, NotFound, Clash, ...)")
    message: str | None = Field(None, description="bad input: what was expected")
    file: str | None = Field(None, description="bad input: the file (or <posted lab>)")
    place: str | None = Field(None, description="bad input: the place, e.g. links[0].mtu")
    line: int | None = Field(None, description="bad input: the line in the file")
    column: int | None = Field(None, description="bad input: the column in the file")


WHY = {401: "no token, or a wrong one", 403: "a request from another origin or for another "
       "host name (cross-site request, DNS rebinding)", 404: "an unknown lab, chain, host, "
       "instance, measurement, database, experiment or run", 409: "a clash with what runs: "
       "already up, being built, busy, not removable", 413: "a body larger than the route "
       "takes", 415: "a body that is not application/json (or application/yaml for a lab "
       "file)", 422: "bad input, with the place", 500: "a bug, in one line (the traceback is "
       "in the server's log)", 502: "the kernel or a tool failed (after rollback)"}
ALWAYS = (401, 403, 422, 500)
WITH_BODY = (413, 415)


def answers(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entry of a route that can also answer ``statuses``."""
    return {s: {"model": ErrorBody, "description": WHY[s]} for s in statuses}


def _with_kind(kind: str, schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    defs.update(schema.pop("$defs", {}))
    props = dict(schema.get("properties", {}))
    props["kind"] = {"const": kind, "type": "string"}
    for key in NODE_PLACEMENT_KEYS:
        props.setdefault(key, {"description": f"the node's {key}"})
    if TABLE.node_kind(kind).attachment == "namespace":  # bridges run no container
        props.setdefault(NODE_IMAGE_KEY, {"description": "the node's container: an image "
                                                         "name, or a mapping with 'name'"})
    required = sorted(set(schema.get("required", [])) | {"kind"})
    return {**schema, "properties": props, "required": required, "title": f"{kind} node"}


def lab_file_schema() -> dict[str, Any]:
    """The lab file (``POST /api/labs``) as a JSON schema."""
    top = LabFile.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    defs: dict[str, Any] = top.pop("$defs", {})
    kinds = []
    for name in TABLE.node_kind_names():
        model = TABLE.node_kind(name).params_model()
        kinds.append(_with_kind(name, model.model_json_schema(
            by_alias=True, ref_template="#/$defs/{model}"), defs))
    props = top["properties"]
    props["name"] = {**props["name"], "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                     "minLength": 1, "maxLength": LAB_NAME_MAX}
    props["nodes"] = {"type": "object", "description": "node name -> the node (its kind and "
                      "the kind's parameters)",
                      "propertyNames": {"pattern": r"^[A-Za-z0-9][A-Za-z0-9_-]*$",
                                        "maxLength": NODE_NAME_MAX},
                      "additionalProperties": {"oneOf": kinds}}
    props["links"] = {"type": "array", "items": {
        "type": "object", "required": ["endpoints"],
        "properties": {"endpoints": {"type": "array", "minItems": 2, "maxItems": 2,
                                     "items": {"oneOf": [{"type": "string"},
                                                         {"type": "object"}]}}}}}
    return _inline(top, defs)


def chain_file_schema() -> dict[str, Any]:
    """A chain file (``POST /api/labs/{lab}/chains``) as a JSON schema."""
    s = ChainFile.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    return _inline(s, s.pop("$defs", {}))


def measurement_schema() -> dict[str, Any]:
    """A measurement request (``POST /api/labs/{lab}/measurements``): one of the types."""
    defs: dict[str, Any] = {}
    one = []
    for model in MODELS.values():
        s = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        defs.update(s.pop("$defs", {}))
        s["required"] = sorted(set(s.get("required", [])) | {"type"})
        one.append(s)
    return _inline({"oneOf": one}, defs)


def _inline(schema: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """``schema`` with every ``#/$defs/X`` reference replaced by X (the document's request
    bodies are self-contained; the models have no recursive references)."""
    if depth > 50:
        raise ValueError("a recursive schema")
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return {**_inline(defs[ref.rsplit("/", 1)[1]], defs, depth + 1), **rest}
        return {k: _inline(v, defs, depth + 1) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_inline(v, defs, depth + 1) for v in schema]
    return schema


def json_body(schema: dict[str, Any], *media: str) -> dict[str, Any]:
    """``openapi_extra`` for a route whose body has ``schema`` in each media type."""
    return {"requestBody": {"required": True, "content": {
        m: {"schema": schema} for m in (media or ("application/json",))}}}


def secure(app: FastAPI, cookie: str) -> None:
    """Declare the token (a bearer token, or the page's cookie) as required everywhere."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version,
                              description=app.description, routes=app.routes)
            doc.setdefault("components", {})["securitySchemes"] = {
                "token": {"type": "http", "scheme": "bearer",
                          "description": "the server's token ('sfclab serve' prints where)"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": cookie,
                           "description": "set by opening /?token=TOKEN in a browser"}}
            doc["security"] = [{"token": []}, {"cookie": []}]
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
