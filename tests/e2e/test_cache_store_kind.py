"""A kind of binary-cache store added in one module (tests/support/objectstore.py, an S3-like
object store registered by the child process): a component built on one machine is pushed
to it signed, listed, installed from it on a second machine that compiles nothing and has
no source, and pruned from it, all through the same commands as a folder or a registry; a
process that did not register the kind refuses its URL as bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import CliResult, assert_no_traceback, child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, one_component_stack
from tests.support.objectstore import ObjectServer

pytestmark = pytest.mark.e2e

PROJECT = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(hello C)\n"
                      "add_executable(hello hello.c)\ninstall(TARGETS hello)\n",
    "hello.c": '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n',
}

# the child registers the test's store kind, then runs rocbuild's CLI as `python -m rocbuild`
# would (a failure still reaches the user as the CLI prints it)
CHILD = ("import sys; from tests.support.objectstore import register; register(); "
         "from rocbuild.cli.main import main; sys.exit(main(sys.argv[1:]))")


def with_store(*args: str, env: dict[str, str], expect: int = 0) -> CliResult:
    argv = [sys.executable, "-c", CHILD, *args]
    done = subprocess.run(argv, env=child_env(env), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    result = CliResult(argv, done.returncode, done.stdout, done.stderr)
    assert_no_traceback(result)
    assert result.returncode == expect, result.explain()
    return result


def test_a_store_kind_of_one_module_stores_serves_and_prunes_a_component(
        tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja", "cc", "ssh-keygen"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "hello", PROJECT)
    home = tmp_path / "home"
    env = {"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    run_cli("build", *flags, "--quiet", "--no-verify", env=env, expect=0)
    run_cli("cache", "keys", "new", "alice", env=env, expect=0)
    with ObjectServer() as server:
        url = server.url("rocm")
        refused = run_cli("cache", "list", url, env=env, expect=2)  # not registered here
        assert f"cache '{url}': no kind of cache is reached by s3like://" in refused.stderr

        pushed = with_store("cache", "push", *flags, "--to", url, "--sign", "alice", env=env)
        assert re.search(r"✔ hello: 1 file, .* signed by alice", pushed.stdout), pushed.stdout
        assert {name.split("/", 1)[1].split(".", 1)[1] for name in server.objects} == {
            "json", "sig", "tar.zst"}
        listed = json.loads(with_store("cache", "list", url, "--json", env=env).stdout)
        assert [(a["component"], bool(a["signer"])) for a in listed["artifacts"]] == [
            ("hello", True)]

        # the second machine: its own workdir, the same prefix path, no way to the sources
        subprocess.run(["rm", "-rf", str(tmp_path / "prefix")], check=True)
        work = tmp_path / "work-b"
        second = [*flags[:2], "--workdir", str(work), *flags[4:6],
                  "--mirror", f"{FAKE_HOST}=file:///nonexistent/", "--cache", url]
        plan = json.loads(with_store("plan", *second, "--json", env=env).stdout)
        assert plan["components"][0]["cache"].startswith(
            f"from cache ({url}, signed by alice"), plan["components"][0]
        built = with_store("build", *second, "--offline", "--quiet", "--no-verify", env=env)
        assert re.findall(r"▶ (\S+): (\w+)$", built.stdout, re.M) == [("hello", "cache")]
        assert not (work / "logs" / "hello" / "compile.log").exists()
        assert not (work / "src").exists()
        hello = tmp_path / "prefix" / "bin" / "hello"
        assert subprocess.run([str(hello)], capture_output=True, text=True).stdout == "hello\n"

        pruned = with_store("cache", "prune", url, "--older-than", "0", env=env)
        assert "removed 1 artifact(s)" in pruned.stdout, pruned.stdout
        assert server.objects == {} and server.requests["DELETE"] == 3
