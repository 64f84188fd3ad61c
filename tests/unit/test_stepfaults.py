"""A tool's own words about a full disk become the step's message (run/engine/stepfaults.py)."""

from __future__ import annotations

from pathlib import Path

from rocbuild.run.engine.stepfaults import full_disk


def test_cmake_wraps_the_message_and_names_the_path_before_it(tmp_path: Path) -> None:
    target = tmp_path / "a-rather-long-prefix-name-that-makes-cmake-wrap" / "share" / "big.txt"
    tail = ["CMake Error at cmake_install.cmake:41 (file):", "  file INSTALL cannot copy file",
            '  "/work/src/a/big.txt" to', f'  "{target}": No space left on', "  device."]
    said = full_disk(tail, [tmp_path])
    assert said is not None
    assert said.startswith(f"No space left on device while writing {target} (the file "
                           f"system of {tmp_path} has ")


def test_gits_words_and_a_tool_that_names_no_path(tmp_path: Path) -> None:
    lock = tmp_path / "src" / "a.partial" / ".git" / "index.lock"
    said = full_disk([f"fatal: sha1 file '{lock}' write error. Out of diskspace"], [tmp_path])
    assert said is not None and said.startswith(f"No space left on device while writing {lock}")
    said = full_disk(["ld: final link failed: No space left on device"], [tmp_path])
    assert said == f"No space left on device (the file system of {tmp_path} has " + \
        said.split(" has ", 1)[1]
    assert full_disk(["error: undefined reference to `f'"], [tmp_path]) is None
    quota = full_disk(["write error: Disk quota exceeded"], [tmp_path])
    assert quota is not None and quota.startswith("the disk quota is used up")
