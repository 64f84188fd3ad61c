"""proc.run_logged and state: real child processes (sys.executable -c), no mocks."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rocbuild.errors import BusyError
from rocbuild.faults import StateWriteError
from rocbuild.proc import ChildRegistry, RunResult, run_logged, session_members
from rocbuild.run.state.state import StateDir, read_json, write_json_atomic


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_output_goes_to_log_and_only_a_tail_stays_in_memory(tmp_path: Path) -> None:
    lines: list[str] = []
    log = tmp_path / "logs" / "x.log"
    result = run_logged(py("for i in range(500): print(f'line {i}')"), log=log, tail=10,
                        on_line=lines.append)
    assert result.ok and result.tail == [f"line {i}" for i in range(490, 500)]
    assert len(lines) == 500
    text = log.read_text()
    assert text.count("\nline ") == 500 and text.startswith("\n=== attempt 1 · ")
    assert re.search(r"\n\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] exit 0 after ", text)
    run_logged(py("print('again')"), log=log)  # appended, with its own header
    assert log.read_text().count("\n$ ") == 2 and "\n=== attempt 2 · " in log.read_text()


def test_exit_code_and_signal_are_classified(tmp_path: Path) -> None:
    failed = run_logged(py("import sys; sys.exit(3)"), log=tmp_path / "a.log")
    assert failed.returncode == 3 and failed.signal is None and not failed.ok
    killed = run_logged(py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),
                        log=tmp_path / "b.log")
    assert killed.signal == 9
    assert RunResult([], 137, [], 0).signal == 9  # a shell reports 128 + N


def test_missing_program_is_a_result_not_a_crash(tmp_path: Path) -> None:
    result = run_logged(["/nonexistent/tool"], log=tmp_path / "c.log")
    assert result.returncode == 127 and "cannot start /nonexistent/tool" in result.tail[0]


def test_child_runs_in_its_own_session_with_stdin_closed(tmp_path: Path) -> None:
    result = run_logged(py("import os, sys; print(os.getsid(0) == os.getpid(), "
                           "sys.stdin.read() == '')"), log=tmp_path / "d.log")
    assert result.tail == ["True True"]


def test_registry_reaps_the_group_of_a_dead_owner(tmp_path: Path) -> None:
    registry = ChildRegistry(tmp_path / "running")
    orphan = subprocess.Popen(py("import time; time.sleep(60)"), start_new_session=True)
    registry.add(orphan, ["sleep-ish"])
    record = tmp_path / "running" / f"{orphan.pid}.json"
    doc = read_json(record)
    assert doc is not None
    doc["owner"] = 2 ** 22 + 12345  # an owner pid that no longer exists
    write_json_atomic(record, doc)
    assert registry.reap_leftovers() == ["sleep-ish"]
    assert orphan.wait(timeout=10) in (-signal.SIGTERM, -signal.SIGKILL)
    assert not record.exists()
    registry.close()


def test_registry_reaps_a_session_whose_leader_is_gone(tmp_path: Path) -> None:
    """ninja puts each job in a process group of its own and `cmake --build` may be gone:
    what is left of the session is still ended, and nothing outside it."""
    registry = ChildRegistry(tmp_path / "running")
    pidfile = tmp_path / "job.pid"
    leader = subprocess.Popen(py(
        "import subprocess, sys, os\n"
        "job = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],\n"
        "                       preexec_fn=os.setpgrp)\n"
        f"open({str(pidfile)!r}, 'w').write(str(job.pid))\n"), start_new_session=True)
    registry.add(leader, ["cmake", "--build", "."])
    bystander = subprocess.Popen(py("import time; time.sleep(300)"), start_new_session=True)
    assert leader.wait(timeout=30) == 0
    job = int(pidfile.read_text())
    record = tmp_path / "running" / f"{leader.pid}.json"
    doc = read_json(record)
    assert doc is not None
    doc["owner"] = 2 ** 22 + 12345
    write_json_atomic(record, doc)
    try:
        assert ChildRegistry(tmp_path / "running").leftovers() == [("cmake --build .", [job])]
        assert registry.reap_leftovers() == ["cmake --build ."]
        assert session_members({leader.pid: int(doc["start_ticks"])}) == []
        assert bystander.poll() is None  # another session: untouched
    finally:
        bystander.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(job, signal.SIGKILL)
        registry.close()


def test_a_recorded_session_whose_leader_pid_is_reused_is_left_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(py("import time; time.sleep(300)"), start_new_session=True)
    folder = tmp_path / "running"
    folder.mkdir()
    write_json_atomic(folder / f"{other.pid}.json", {
        "pid": other.pid, "sid": other.pid, "start_ticks": 1, "argv": ["ninja"],
        "create_time": 0.0, "owner": 2 ** 22 + 12345})
    try:
        assert ChildRegistry(folder).reap_leftovers() == []
        assert other.poll() is None
        assert not list(folder.iterdir())
    finally:
        other.kill()


def test_stamps_are_atomic_and_compared_by_fingerprint(tmp_path: Path) -> None:
    state = StateDir.shared(tmp_path)
    assert not state.stamp_matches("a", "configure", "f1")
    state.record_failure("a", "compile", message="x")
    state.write_stamp("a", "configure", "f1", seconds=1.0)
    assert state.stamp_matches("a", "configure", "f1")
    assert not state.stamp_matches("a", "configure", "f2")
    assert state.read_failure("a") is None  # a success clears the component's failure
    assert not list((tmp_path / "state").rglob("*.tmp"))
    state.stamp_path("a", "compile").write_text("{not json")
    assert state.read_stamp("a", "compile") is None  # a damaged stamp means "not done"


def test_lock_refuses_a_second_holder_and_frees_on_exit(tmp_path: Path) -> None:
    state = StateDir.shared(tmp_path)
    with state.lock():
        holder = subprocess.run(
            py(f"from rocbuild.run.state.state import StateDir; from pathlib import Path\n"
               f"try:\n  StateDir.shared(Path({str(tmp_path)!r})).lock().__enter__()\n"
               f"except Exception as e: print(type(e).__name__, e)"),
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()},
            cwd=Path(__file__).resolve().parents[2])
        assert f"BusyError another rocbuild run (pid {os.getpid()})" in holder.stdout
    with state.lock():  # released: can be taken again
        pass


def test_lock_in_one_process_twice_is_refused(tmp_path: Path) -> None:
    state = StateDir.shared(tmp_path)
    with state.lock(), pytest.raises(BusyError), state.lock():
        pass


def test_attempt_markers_name_the_environment_and_an_interruption(tmp_path: Path) -> None:
    from rocbuild.proc import log_attempt

    log = tmp_path / "step.log"
    env = {**os.environ, "ROCBUILD_TEST_MARK": "on the marker"}
    env.pop("HOME", None)
    seen: list[str] = []

    def stop_at_first_line(line: str) -> None:
        seen.append(line)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_logged(py("print('hello', flush=True); import time; time.sleep(30)"), log=log,
                   env=env, cwd=tmp_path, on_line=stop_at_first_line)
    text = log.read_text()
    assert seen == ["hello"]
    assert "# env ROCBUILD_TEST_MARK=on the marker\n" in text
    assert "# env -HOME (unset)" in text and f"# in {tmp_path}" in text
    assert re.search(r"\] attempt 1 interrupted by Ctrl-C \(SIGINT\) after", text)
    log_attempt(log, "fetch https://example.invalid/x.git v1")  # a step rocbuild does itself
    text = log.read_text()
    assert "\n=== attempt 2 · " in text and "$ fetch https://example.invalid/x.git v1" in text
    assert "has no end line" not in text  # attempt 1 said it was interrupted
    log_attempt(log, "fetch again")  # attempt 2 never ended: the next marker says so
    assert "# attempt 2 has no end line" in log.read_text()


def test_a_stamp_write_that_dies_midway_leaves_the_old_stamp_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill the write between the data and the rename (where a SIGKILL or a full disk would
    stop it): the stamp on disk must still be the old one, whole, and no temp file stays.
    A write straight into the stamp file would leave it new or half-written."""
    state = StateDir.shared(tmp_path)
    state.write_stamp("a", "install", "old", seconds=1.0)
    before = state.stamp_path("a", "install").read_bytes()

    def dies(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("rocbuild.run.state.state.os.replace", dies)
    with pytest.raises(StateWriteError, match="no space left"):  # one message (faults.py)
        state.write_stamp("a", "install", "new", seconds=2.0, big="x" * 100_000)
    assert state.stamp_path("a", "install").read_bytes() == before
    assert state.stamp_matches("a", "install", "old")
    assert [p.name for p in state.stamp_path("a", "install").parent.iterdir()] == ["install.json"]


# --- a probe's answer is kept while the program and what it reads are unchanged --
def _counting_tool(folder: Path, version: str) -> tuple[Path, Path]:
    """An executable that prints ``version`` and counts its runs in a file beside it."""
    folder.mkdir(exist_ok=True)
    tool, count = folder / "tool", folder / "runs"
    tool.write_text(f"#!{sys.executable}\nimport pathlib\np = pathlib.Path({str(count)!r})\n"
                    f"p.write_text(p.read_text() + 'x' if p.exists() else 'x')\n"
                    f"print('tool version {version}')\n")
    tool.chmod(0o755)
    return tool, count


def test_probe_answer_is_kept_until_the_tool_changes(tmp_path: Path) -> None:
    from rocbuild.proc import run_probe

    memo = tmp_path / "state" / "probes.json"
    memo.parent.mkdir()
    tool, count = _counting_tool(tmp_path / "bin", "1.0")
    for _ in range(3):
        done = run_probe([str(tool), "--version"], memo=memo)
        assert done is not None and done.stdout == "tool version 1.0\n"
    assert count.read_text() == "x"  # asked once, then answered from the memo
    stamp = tool.stat()
    os.utime(tool, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))  # an upgrade
    assert run_probe([str(tool), "--version"], memo=memo).stdout == "tool version 1.0\n"
    assert count.read_text() == "xx"
    _counting_tool(tmp_path / "bin", "2.0")  # another content: another size
    assert run_probe([str(tool), "--version"], memo=memo).stdout == "tool version 2.0\n"
    assert count.read_text() == "xxx"
    # another command line of the same tool is its own question
    run_probe([str(tool), "--help"], memo=memo)
    assert count.read_text() == "xxxx"


def test_probe_answer_follows_the_files_it_reads(tmp_path: Path) -> None:
    from rocbuild.proc import run_probe

    memo = tmp_path / "probes.json"
    tool, count = _counting_tool(tmp_path / "bin", "1.0")
    database = tmp_path / "status"
    database.write_text("one package\n")
    run_probe([str(tool)], memo=memo, reads=[database])
    run_probe([str(tool)], memo=memo, reads=[database])
    assert count.read_text() == "x"
    database.write_text("two packages\n")  # dpkg installed something: ask again
    run_probe([str(tool)], memo=memo, reads=[database])
    assert count.read_text() == "xx"
    database.unlink()  # nothing to key the answer on: always asked
    run_probe([str(tool)], memo=memo, reads=[database])
    run_probe([str(tool)], memo=memo, reads=[database])
    assert count.read_text() == "xxxx"


def test_probe_memo_is_written_only_into_an_existing_folder(tmp_path: Path) -> None:
    from rocbuild.proc import run_probe

    tool, count = _counting_tool(tmp_path / "bin", "1.0")
    memo = tmp_path / "fresh-workdir" / "state" / "probes.json"  # `plan` of a new workdir
    run_probe([str(tool)], memo=memo)
    run_probe([str(tool)], memo=memo)
    assert count.read_text() == "xx" and not (tmp_path / "fresh-workdir").exists()
    memo.parent.mkdir(parents=True)
    memo.write_text("not json")  # a damaged memo is ignored and replaced
    run_probe([str(tool)], memo=memo)
    run_probe([str(tool)], memo=memo)
    assert count.read_text() == "xxx"


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.mark.parametrize("runner", ["run_capture", "run_logged"])
def test_a_stop_signal_as_the_child_starts_ends_the_child_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: str) -> None:
    """SIGHUP delivered the moment Popen has forked the child, before rocbuild holds it (as
    __main__'s handler makes it a KeyboardInterrupt): it came out of Popen, rocbuild exited
    130 and the child ran on (test_signals[plan-1] under load, 13 runs of 30 with both cores
    busy). The interrupt now propagates and the child is ended with it."""
    from rocbuild import proc

    started: list[subprocess.Popen[str]] = []
    real_start = proc._start

    def start_then_hangup(*args: object, **kwargs: object) -> subprocess.Popen[str]:
        child = real_start(*args, **kwargs)  # type: ignore[arg-type]
        started.append(child)
        os.kill(os.getpid(), signal.SIGHUP)  # the signal's handler runs before this returns
        return child

    monkeypatch.setattr(proc, "_start", start_then_hangup)
    previous = signal.signal(signal.SIGHUP, _stop)
    argv = py("import time; time.sleep(300)")
    try:
        with pytest.raises(KeyboardInterrupt):
            if runner == "run_capture":
                proc.run_capture(argv, timeout=None, registry=ChildRegistry(None))
            else:
                run_logged(argv, log=tmp_path / "step.log", registry=ChildRegistry(None))
        assert started and started[0].poll() is not None, "the child outlived the interrupt"
    finally:
        signal.signal(signal.SIGHUP, previous)
        for child in started:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_a_child_registered_after_the_runs_children_were_ended_is_ended_too(
        tmp_path: Path) -> None:
    """--parallel: a worker thread's Popen returned as the main thread ended the run's
    children (kill_all), and registered its child after: it ran on after rocbuild exited."""
    registry = ChildRegistry(None)
    registry.kill_all()  # the interrupt's report phase came first
    result = run_logged(py("import time; time.sleep(300)"), registry=registry, timeout=60)
    assert not result.timed_out and result.signal == signal.SIGTERM
