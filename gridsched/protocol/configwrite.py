"""Writing settings into a configuration file: ``gctl set`` and ``gsim tune --write``.

A setting is ``TABLE.KEY=VALUE`` (``scheduler.p=0.3``, ``devices.gpu.share=2``).
VALUE is read as a TOML value where it is one (``0.3``, ``true``, ``"a b"``,
``[1, 2]``) and as a string otherwise (``45m``).  The file with the settings
applied is checked as the daemon would load it (:func:`gridsched.protocol.config.parse`)
before anything is written; then it is written whole, with tomli-w, through a
temporary file in the same directory renamed over it, with the old file's
mode and owner.  tomli-w writes plain TOML: the file's comments and layout are
not kept, so the previous text is kept beside it as ``FILE.bak``.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from gridsched.protocol.config import Config, ConfigError, parse


class SettingError(ValueError):
    """A setting that cannot be applied; the message is one line."""


def parse_setting(text: str) -> tuple[list[str], Any]:
    """``TABLE.KEY=VALUE`` as (the path of keys, the value)."""
    key, eq, raw = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise SettingError(f"'{text}': not KEY=VALUE (e.g. scheduler.p=0.3)")
    path = key.split(".")
    if len(path) < 2 or not all(part.replace("_", "").replace("-", "").isalnum() for part in path):
        raise SettingError(f"'{key}': not TABLE.KEY (e.g. scheduler.threshold)")
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path, value


def applied(data: dict[str, Any], settings: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """A copy of the file's ``data`` with ``settings`` applied."""
    out: dict[str, Any] = _copy(data)
    for path, value in settings:
        table = out
        for part in path[:-1]:
            nxt = table.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise SettingError(f"'{'.'.join(path)}': {part} is a value, not a table")
            table = nxt
        table[path[-1]] = value
    return out


def _copy(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in data.items()}


def read(path: Path) -> dict[str, Any]:
    """The file's tables; {} when it does not exist yet."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise SettingError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise SettingError(f"{path}: {e}") from None


def check(path: Path, data: dict[str, Any]) -> Config:
    """The configuration ``data`` makes, as the daemon would load it from ``path``."""
    try:
        return parse(data, str(path))
    except ConfigError as e:
        raise SettingError(str(e)) from None


def write(path: Path, data: dict[str, Any]) -> Path | None:
    """Write ``data`` as the whole file at ``path`` (see the module's text); the backup's path, if any."""
    import tomli_w

    text = tomli_w.dumps(data)
    target = Path(os.path.realpath(path))
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise SettingError(f"{path}: {e.strerror}; nothing written") from None
    backup = None
    tmp = None
    try:
        if st is not None:
            backup = target.with_name(target.name + ".bak")
            old = target.read_bytes()
            _atomic(backup, old, st)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            if st is not None:
                os.fchmod(f.fileno(), st.st_mode & 0o7777)
                if os.geteuid() == 0:
                    os.fchown(f.fileno(), st.st_uid, st.st_gid)
            os.fsync(f.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise SettingError(f"cannot write {path}: {e.strerror or e}; nothing changed") from None
    finally:
        if tmp is not None:
            os.unlink(tmp)
    return backup


def _atomic(path: Path, data: bytes, st: os.stat_result) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), st.st_mode & 0o7777)
            if os.geteuid() == 0:
                os.fchown(f.fileno(), st.st_uid, st.st_gid)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
