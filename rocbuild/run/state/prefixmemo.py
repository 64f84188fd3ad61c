"""The prefix a workdir last built into, remembered as its base is (run/state/basememo.py).

A build records its configuration in ``state/configs.json`` when its preflight passed
(run/state/workdirs.py ``claim``), with whether the user chose that prefix (``--prefix``,
``ROCBUILD_PREFIX``, ``prefix =`` in rocbuild.toml) and the recipes it was built from. A later
command on that workdir without a prefix of its own then continues the last build whose prefix
the user chose, and says so: a plain ``rocbuild build`` after ``build --prefix ~/opt/mystack``
goes into ``~/opt/mystack`` again, and ``plan``, ``status`` and ``logs`` show that prefix.
Another ``--prefix`` is a second configuration, as before. Each stack has its own memory (the
default workdir is shared by every stack a user builds: ``workdir.same_stack``), and a prefix
of other targets than ``--target`` asks for now is not remembered (the stack's prefix template
then names the new configuration).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rocbuild.model.settings import Settings
from rocbuild.model.workdir import read_registry, registry_path, same_stack, stack_name_of

SOURCE_PREFIX = "workdir "  # settings.source("prefix") of a remembered prefix


def apply(settings: Settings) -> Settings:
    """``settings`` with the prefix of this stack's last build in the workdir when the user
    gave none and had chosen that one (``given`` in its record), with a note saying so. The
    builds of other stacks in the workdir (the default one is shared) do not count."""
    if settings.source("prefix") != "default":
        return settings
    name = stack_name_of(settings.recipes)
    registry = {k: v for k, v in read_registry(settings.workdir).items()
                if same_stack(v, name, settings.recipes)}
    if not registry:
        return settings
    last = max(registry, key=lambda k: float(registry[k].get("used") or 0))
    entry = registry[last]
    if not entry.get("given"):
        return settings  # the last build went into the stack's own prefix: nothing to continue
    if settings.target is not None and [str(t) for t in settings.target] != entry.get("targets"):
        return settings
    where = registry_path(settings.workdir)
    note = (f"prefix {last}: the prefix of the last build in this workdir (recorded in "
            f"{where}); give --prefix for another")
    remembered = settings.with_value("prefix", Path(last), f"{SOURCE_PREFIX}{where}")
    return replace(remembered, notes=(*remembered.notes, note))
