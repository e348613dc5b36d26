"""Where the page's JavaScript libraries (and the API page's Swagger UI) are: npm packages pinned in the checkout's
``package-lock.json`` and installed by ``make setup`` (``npm ci``) into ``node_modules/``, or
``$SFCLAB_WEB_VENDOR`` (a ``node_modules`` directory elsewhere).  Nothing is fetched at run time.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import NotFound

ENV = "SFCLAB_WEB_VENDOR"
#: the name the page asks for -> the file inside node_modules
LIBRARIES = {"cytoscape.min.js": "cytoscape/dist/cytoscape.min.js",
             "plotly.min.js": "plotly.js-dist-min/plotly.min.js",
             "swagger-ui-bundle.js": "swagger-ui-dist/swagger-ui-bundle.js",
             "swagger-ui.css": "swagger-ui-dist/swagger-ui.css",
             "swagger-favicon.png": "swagger-ui-dist/favicon-32x32.png"}
STATIC = Path(__file__).resolve().parent / "static"


def node_modules() -> Path:
    env = os.environ.get(ENV)
    return Path(env) if env else Path(__file__).resolve().parents[3] / "node_modules"


def library(name: str) -> Path:
    """The file of library ``name`` (a key of :data:`LIBRARIES`); 404 when it is not installed."""
    if name not in LIBRARIES:
        raise NotFound(f"no library {name!r} (libraries: {', '.join(LIBRARIES)})")
    path = node_modules() / LIBRARIES[name]
    if not path.is_file():
        raise NotFound(f"{path} is missing: run 'make setup' (npm ci) or set ${ENV}")
    return path
