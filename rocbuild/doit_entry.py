"""The namespace plain `doit` loads from dodo.py, built from settings like the CLI's."""

from __future__ import annotations

import sys
from typing import Any

from doit import get_var

from rocbuild.build import BuildContext, Output
from rocbuild.engine import make_reporter
from rocbuild.errors import RocbuildError, report
from rocbuild.graph import load_stack
from rocbuild.settings import resolve
from rocbuild.tasks import make_namespace


def namespace_from_environment() -> dict[str, Any]:
    flags = {"target": get_var("target", None), "jobs": get_var("jobs", None)}
    try:
        settings = resolve({k: v for k, v in flags.items() if v is not None})
        stack = load_stack(settings)
    except RocbuildError as exc:  # same one-line message and exit code as the CLI
        raise SystemExit(report(exc, sys.stderr)) from None
    ctx = BuildContext(stack=stack, settings=settings, output=Output(sys.stdout))
    namespace = make_namespace(ctx)
    namespace["DOIT_CONFIG"]["reporter"] = make_reporter(ctx)
    return namespace
