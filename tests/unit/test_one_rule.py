"""Each host rule has one implementation: a second one (the way preflight's disk check once
drifted from doctor's) fails here. Each entry: a pattern that only the rule's own code may
contain, and the modules allowed to contain it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "rocbuild"

RULES = {
    # free disk: measured by hostreqs.free_space, compared per filesystem by
    # hostreqs.disk_by_filesystem (doctor and preflight); stepfaults only names the room left,
    # faults only which folder is full once a write failed (it names no budget)
    "disk": (r"f_bavail|\bfree_space\(", {"checks/hostreqs.py", "run/engine/stepfaults.py",
                                          "faults.py"}),
    # memory jobs may take: resources.memory_budget (job sizing, the distcc split, doctor)
    "memory budget": (r"swap_free \* |swap_free\*", {"model/resources.py"}),
    # swap advice: hostload.swap_advice (doctor, a compile that died of memory)
    "swap advice": (r"mkswap", {"checks/hostload.py"}),
    # the CPU count: hostload.usable_cpus (affinity and cgroup quota: job sizing, the bounds)
    "cpu count": (r"sched_getaffinity|cpu_count\(", {"checks/hostload.py"}),
    # the base road: base.why_built (load_base on a real base, roads.assumed_taken's estimate)
    "base road": (r"stales_users\(", {"model/base.py"}),
}


def _holders(pattern: str) -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if re.search(pattern, path.read_text()):
            found.add(path.relative_to(PACKAGE).as_posix())
    return found


@pytest.mark.parametrize("rule", sorted(RULES))
def test_one_implementation(rule: str) -> None:
    pattern, allowed = RULES[rule]
    assert _holders(pattern) <= allowed, f"{rule}: a second implementation"


# names that were defined twice with two meanings: each is defined once now
ONCE = ("load_stack", "within", "job_counts", "step_env", "Choice", "Verdict")


def test_names_that_collided_are_defined_once() -> None:
    import ast

    where: dict[str, list[str]] = {name: [] for name in ONCE}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            name = getattr(node, "name", None)
            if name in where:
                where[name].append(path.relative_to(PACKAGE).as_posix())
    assert {n: w for n, w in where.items() if len(w) > 1} == {}


def test_docstrings_cite_nothing_outside_the_repository() -> None:
    """Facts are cited from docs/architecture.md's Facts section (docs/development.md,
    Docstrings), never from notes that are not in the repository or an issue number."""
    assert _holders(r"gfx906-facts|anchors\.md|DESIGN\.md|\bissue \d+") == set()
