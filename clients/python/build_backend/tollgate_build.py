"""The package's own PEP 517 build backend: standard library only, so that
``pip install clients/python`` works in a plain venv with no network — no setuptools, no wheel.

pip runs it (``[build-system] backend-path`` in pyproject.toml) to build the wheel of
``tollgate_client``: the files of ``src/tollgate_client`` and a ``.dist-info`` whose METADATA is
made from pyproject.toml's ``[project]`` table. ``pip install -e`` gets an editable wheel (a
``.pth`` file naming ``src``); ``python -m build --sdist`` a source archive.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tollgate_client"
SOURCES = ROOT / "src" / PACKAGE
WHEEL_TAG = "py3-none-any"
# A fixed time for every archive member: the same sources build the same wheel.
FIXED_DATE_TIME = (2020, 1, 1, 0, 0, 0)


def project() -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return table


def dist_name() -> str:
    return str(project()["name"]).replace("-", "_")


def dist_info() -> str:
    return f"{dist_name()}-{project()['version']}.dist-info"


def metadata() -> str:
    p = project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}"]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        return "\n".join(lines) + "\n\n" + (ROOT / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n"


def wheel_file() -> str:
    return f"Wheel-Version: 1.0\nGenerator: tollgate_build\nRoot-Is-Purelib: true\nTag: {WHEEL_TAG}\n"


def package_files() -> list[tuple[str, bytes]]:
    """(path in the wheel, content) of every file of the package, sorted; no caches."""
    files = []
    for path in sorted(SOURCES.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((f"{PACKAGE}/{path.relative_to(SOURCES).as_posix()}", path.read_bytes()))
    return files


def write_wheel(wheel_directory: str, files: list[tuple[str, bytes]]) -> str:
    """Writes the wheel of ``files`` with its dist-info (METADATA, WHEEL, RECORD); its file name."""
    info = dist_info()
    files = files + [(f"{info}/METADATA", metadata().encode()), (f"{info}/WHEEL", wheel_file().encode())]
    record = []
    for name, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{dist_name()}-{project()['version']}-{WHEEL_TAG}.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", zipfile.ZIP_DEFLATED) as wheel:
        for member, data in files:
            entry = zipfile.ZipInfo(member, FIXED_DATE_TIME)
            entry.external_attr = 0o644 << 16
            wheel.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return name


# --- PEP 517 ----------------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: dict[str, Any] | None = None) -> str:
    folder = Path(metadata_directory) / dist_info()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_text(metadata(), encoding="utf-8")
    (folder / "WHEEL").write_text(wheel_file(), encoding="utf-8")
    return folder.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    return write_wheel(wheel_directory, package_files())


def build_editable(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    """A wheel holding one ``.pth`` file that puts ``src`` on the path: edits take effect at once."""
    return write_wheel(wheel_directory, [(f"{dist_name()}.pth", f"{ROOT / 'src'}\n".encode())])


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    base = f"{dist_name()}-{project()['version']}"
    members = ["pyproject.toml", "README.md", "build_backend/tollgate_build.py"]
    members += [f"src/{name}" for name, _ in package_files()]
    name = f"{base}.tar.gz"
    with tarfile.open(Path(sdist_directory) / name, "w:gz") as archive:
        for member in members:
            data = (ROOT / member).read_bytes()
            entry = tarfile.TarInfo(f"{base}/{member}")
            entry.size = len(data)
            entry.mtime = 1577836800
            archive.addfile(entry, io.BytesIO(data))
        pkg_info = metadata().encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(pkg_info)
        entry.mtime = 1577836800
        archive.addfile(entry, io.BytesIO(pkg_info))
    return name
