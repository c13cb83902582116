import os
import pathlib

import lethe_client


def test_typed_package_installed():
    here = pathlib.Path(lethe_client.__file__).resolve().parent
    assert (here / "py.typed").is_file()
    installed = os.environ.get("LETHE_TEST_INSTALLED")
    if installed:  # run from pkg/embedded TestPythonClientPackage: the wheel built from the repository
        assert pathlib.Path(installed).resolve() in here.parents


def test_public_api_is_exported():
    for name in lethe_client.__all__:
        assert hasattr(lethe_client, name), name
