import pathlib
import subprocess
import sys

import pytest

import lethe_client

CONFIG = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"


@pytest.mark.parametrize("version", ["3.10", "%d.%d" % sys.version_info[:2]])
def test_the_package_type_checks_strictly(version):
    # The oldest Python pyproject.toml declares, and this one.
    pkg = pathlib.Path(lethe_client.__file__).resolve().parent
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", "/dev/null",
                          "--strict", "--python-version", version, str(pkg)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues found" in out.stdout
