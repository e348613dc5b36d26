"""Import every function module so each registers its kind.  Add new modules here."""

import importlib
import pkgutil

from . import __path__ as _pkg_path

for _m in pkgutil.iter_modules(_pkg_path):
    if _m.name not in ("base", "load_all"):
        importlib.import_module(f"{__package__}.{_m.name}")
