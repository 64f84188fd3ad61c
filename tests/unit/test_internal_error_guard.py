"""The autouse guard of tests/conftest.py: a test whose step logs hold an error inside
rocbuild fails, however the test itself ended; one marked ``internal_error`` may have one."""

from __future__ import annotations

import pytest

from rocbuild.run.engine.runner import INTERNAL_ERROR
from tests.conftest import INTERNAL_ERROR as GUARDED
from tests.conftest import REPO

pytest_plugins = ["pytester"]

INNER = '''
import pytest

def _log(tmp_path, text):
    log = tmp_path / "work" / "logs" / "alpha" / "install.log"
    log.parent.mkdir(parents=True)
    log.write_text(text)

def test_hidden(tmp_path):
    _log(tmp_path, "step output\\nrocbuild error:\\nTraceback (most recent call last):\\n")

@pytest.mark.internal_error
def test_on_purpose(tmp_path):
    _log(tmp_path, "rocbuild error:\\nTraceback (most recent call last):\\n")

def test_an_ordinary_failure_is_fine(tmp_path):
    _log(tmp_path, "error: #error beta was configured to fail\\n")
'''


def test_an_internal_error_in_a_step_log_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    internal_error: on purpose\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-p", "no:cacheprovider")
    # test_hidden itself passes; the guard fails it in its teardown
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*an error inside rocbuild in *alpha/install.log*"])
    assert "test_hidden" in result.stdout.str().split("short test summary")[1]


def test_the_guard_looks_for_what_the_runner_writes() -> None:
    assert GUARDED == INTERNAL_ERROR
