"""git's own words reach the user: every line that names the cause, not only the last."""

from __future__ import annotations

from pathlib import Path

from rocbuild.run.sources.sources import GitFailed, git_cause

DUBIOUS = """\
fatal: detected dubious ownership in repository at '/srv/work/src/rocr'
To add an exception for this directory, call:

\tgit config --global --add safe.directory /srv/work/src/rocr
"""

NOT_A_REPO = """\
fatal: '/srv/mirror/ROCR-Runtime.git' does not appear to be a git repository
fatal: Could not read from remote repository.

Please make sure you have the correct access rights
and the repository exists.
"""


def test_the_line_that_names_the_cause_is_kept_with_the_fix() -> None:
    text = git_cause(DUBIOUS)
    assert "detected dubious ownership" in text
    assert "git config --global --add safe.directory /srv/work/src/rocr" in text
    error = GitFailed(["status"], Path("/srv/work/src/rocr"), DUBIOUS)
    assert "dubious ownership" in str(error) and error.tip and "safe.directory" in error.tip


def test_the_first_fatal_line_is_not_dropped_for_the_last_one() -> None:
    text = git_cause(NOT_A_REPO)
    assert "does not appear to be a git repository" in text
    assert "the repository exists" in text
