"""tools/install.py: pip's settings handed to uv as flags, or pip where one cannot be."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
import install  # noqa: E402


def test_pips_settings_become_uvs_flags_and_an_unknown_one_means_pip(monkeypatch):
    listed = ("global.find-links='/opt/wheels /opt/more'\n"
              "global.constraint='/etc/xdg/pip/constraints.txt'\n"
              "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'\n"
              ":env:.find-links='/opt/wheels'\n"  # (PIP_FIND_LINKS: over the files' value)
              ":env:.default-timeout='180'\n"
              ":env:.disable-pip-version-check='1'\n"
              "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
              "freeze.all='true'\n")  # (another command's section: not an install's)
    settings = install.parse_settings(listed)
    assert settings == {"find-links": "/opt/wheels", "constraint": "/etc/xdg/pip/constraints.txt",
                        "extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple",
                        "default-timeout": "180", "cert": "/etc/ssl/certs/ca-certificates.crt"}
    monkeypatch.setattr(install, "pip_settings", lambda python: settings)
    command, env = install.uv_command("/venv/bin/python", ["-e", ".[dev]"])
    assert command == ["/venv/bin/uv", "pip", "install", "--python", "/venv/bin/python", "-q", "--index-strategy",
                       "unsafe-best-match", "--find-links", "/opt/wheels", "--constraint",
                       "/etc/xdg/pip/constraints.txt", "--extra-index-url", "file:///opt/pypi/simple",
                       "--extra-index-url", "file:///opt/pypi-more/simple", "-e", ".[dev]"]
    assert (env["UV_HTTP_TIMEOUT"], env["SSL_CERT_FILE"]) == ("180", "/etc/ssl/certs/ca-certificates.crt")
    with pytest.raises(ValueError, match=r"pip setting global.proxy='http://p:3128' has no uv counterpart"):
        install.parse_settings(listed + "global.proxy='http://p:3128'\n")
