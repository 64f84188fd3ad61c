"""The workdir's layout (model/workdir.py): which steps every configuration shares, and
where each configuration lives."""

from __future__ import annotations

import json
from pathlib import Path

from rocbuild.model import steptable
from rocbuild.model import workdir as layout


def test_the_shared_steps_are_the_step_tables_source_and_run_wide_steps() -> None:
    declared = {k.name for k in steptable.STEPS if k.source or k.who == steptable.RUN}
    records = {k.record[1] for k in steptable.STEPS if k.record is not None}
    assert declared | records == layout.SHARED_STEPS


def test_the_first_prefix_lives_in_the_workdir_and_each_further_one_apart(tmp_path: Path
                                                                          ) -> None:
    root = tmp_path / "work"
    first, second = tmp_path / "p1", tmp_path / "p2"
    # a new workdir (or one of an earlier rocbuild: no record) keeps the first one in itself
    assert layout.Workdir.for_prefix(root, first).config == root
    record = {"configurations": {str(first): {"dir": "."}}}
    layout.registry_path(root).parent.mkdir(parents=True)
    layout.registry_path(root).write_text(json.dumps(record))
    assert layout.Workdir.for_prefix(root, first).is_root_config
    other = layout.Workdir.for_prefix(root, second)
    assert other.config.parent == root / "configs" and not other.is_root_config
    # shared parts are the workdir's, a configuration's own parts its folder's
    assert other.checkout("rocr") == root / "src" / "rocr"
    assert other.stamp("rocr", "fetch") == root / "state/stamps/rocr/fetch.json"
    assert other.stamp("rocr", "compile") == other.config / "state/stamps/rocr/compile.json"
    assert other.build_dir("rocr") == other.config / "build" / "rocr"
    assert other.log("rocr", "patch") == root / "logs/rocr/patch.log"
    assert other.log("rocr", "install") == other.config / "logs/rocr/install.log"
    # an unreadable record counts as none: the first configuration is the workdir's own
    layout.registry_path(root).write_text("{not json")
    assert layout.Workdir.for_prefix(root, second).config == root
