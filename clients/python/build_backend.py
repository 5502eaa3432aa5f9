"""A PEP 517 build backend in the standard library: the package is pure Python, one folder.

Python's own setuptools needs the separate ``wheel`` package to build a wheel before setuptools 70.1,
so ``pip install --no-build-isolation`` would fail on a machine without it; this backend needs
nothing (``requires = []``), so the install works offline with or without build isolation.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "idemgate"


def _project() -> dict[str, Any]:
    text = open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8").read()
    try:
        import tomllib

        return dict(tomllib.loads(text)["project"])
    except ImportError:  # Python < 3.11: the few string fields of [project]
        section = text.split("[project]", 1)[1].split("\n[", 1)[0]
        return {m.group(1): m.group(2) for m in re.finditer(r'^([\w-]+)\s*=\s*"([^"]*)"', section, re.M)}


def _metadata() -> str:
    project = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}", f"Summary: {project.get('description', '')}"]
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    readme = open(os.path.join(HERE, "README.md"), encoding="utf-8").read()
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def _dist_name() -> str:
    project = _project()
    return f"{project['name'].replace('-', '_')}-{project['version']}"


def _package_files() -> list[str]:
    names = []
    for folder, dirs, files in os.walk(os.path.join(HERE, PACKAGE)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py") or name == "py.typed":
                names.append(os.path.relpath(os.path.join(folder, name), HERE).replace(os.sep, "/"))
    return sorted(names)


def _write_wheel(wheel_directory: str, files: dict[str, bytes]) -> str:
    dist = _dist_name()
    info = f"{dist}.dist-info"
    files = {**files, f"{info}/METADATA": _metadata().encode(), f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: idemgate build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    basename = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, basename), "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return basename


def get_requires_for_build_wheel(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    return []


get_requires_for_build_sdist = get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, {name: open(os.path.join(HERE, name), "rb").read() for name in _package_files()})


def build_editable(wheel_directory: str, config_settings: Optional[dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, {f"{PACKAGE}.pth": (HERE + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[dict[str, Any]] = None) -> str:
    dist = _dist_name()
    basename = f"{dist}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, basename), "w:gz") as sdist:
        for name in ["pyproject.toml", "README.md", "build_backend.py", *_package_files()]:
            sdist.add(os.path.join(HERE, name), f"{dist}/{name}")
        pkg_info = _metadata().encode()
        entry = tarfile.TarInfo(f"{dist}/PKG-INFO")
        entry.size = len(pkg_info)
        sdist.addfile(entry, io.BytesIO(pkg_info))
    return basename
