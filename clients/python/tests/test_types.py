import pathlib
import subprocess
import sys

import lethe_client

CONFIG = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_package_type_checks_strictly():
    pkg = pathlib.Path(lethe_client.__file__).resolve().parent
    out = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", "/dev/null",
                          "--strict", str(pkg)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues found" in out.stdout
