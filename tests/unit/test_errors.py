"""Every error a user can see has an exit code from the documented table (errors.EXIT_CODES,
rendered into docs/exit-codes.md), and one printer shows them all."""

from __future__ import annotations

import importlib
import io
import pkgutil
import re
from pathlib import Path

import rocbuild
from rocbuild import errors
from rocbuild.errors import ConfigError, RocbuildError, report

EXIT_CODES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "exit-codes.md"


def _all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_all_subclasses(sub)}
    return found


def test_every_rocbuild_error_in_the_package_has_a_documented_exit_code():
    for module in pkgutil.walk_packages(rocbuild.__path__, "rocbuild."):
        if module.name != "rocbuild.__main__":  # runs the CLI on import
            importlib.import_module(module.name)
    classes = {c for c in _all_subclasses(RocbuildError) if c.__module__.startswith("rocbuild.")}
    assert {c.__name__ for c in classes} >= {"ConfigError", "BuildFailed", "BusyError",
                                              "PreflightError", "StateWriteError",
                                              "CacheUnavailable", "ActivationError",
                                              "GitFailed"}
    for cls in classes:
        assert cls.exit_code in errors.EXIT_CODES, f"{cls.__module__}.{cls.__name__}"


def test_the_exit_code_table_is_the_documented_one():
    text = EXIT_CODES_PAGE.read_text()  # generated from errors.EXIT_CODES (test_refdocs.py)
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", text, re.M)}
    assert documented == set(errors.EXIT_CODES) == {0, 1, 2, 3, 4, 130}


def test_user_facing_classes_are_declared_in_errors_module():
    # the old homes re-export them, so `from rocbuild.faults import StateWriteError` works
    from rocbuild import faults
    from rocbuild.prefix import activate
    from rocbuild.run.cache import cache_store
    from rocbuild.run.engine import preflight
    assert preflight.PreflightError is errors.PreflightError
    assert faults.StateWriteError is errors.StateWriteError
    assert cache_store.CacheUnavailable is errors.CacheUnavailable
    assert activate.ActivationError is errors.ActivationError
    assert errors.PreflightError.exit_code == errors.EXIT_BAD_INPUT


def test_report_prints_the_message_then_the_tip_and_returns_the_code():
    out = io.StringIO()
    code = report(ConfigError("recipes/x.toml: key 'foo' is not allowed", tip="remove it"), out)
    assert code == 2
    assert out.getvalue() == ("rocbuild: error: recipes/x.toml: key 'foo' is not allowed\n"
                              "TIP: remove it\n")
    out = io.StringIO()
    assert report(errors.BusyError("held"), out) == 3
    assert out.getvalue() == "rocbuild: error: held\n"
