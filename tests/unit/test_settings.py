from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.errors import ConfigError
from rocbuild.model.settings import resolve, rewrite_url


def test_precedence_flag_over_env_over_config_over_default(tmp_path: Path) -> None:
    (tmp_path / "rocbuild.toml").write_text('jobs = 3\nworkdir = "/cfg/work"\ntarget = "gfx90a"\n')
    env = {"ROCBUILD_JOBS": "5", "ROCBUILD_TARGET": "gfx1030"}
    s = resolve({"jobs": "7"}, env=env, cwd=tmp_path)
    assert (s.jobs, s.source("jobs")) == (7, "flag --jobs")
    assert [str(t) for t in s.target] == ["gfx1030"] and s.source("target") == "env ROCBUILD_TARGET"
    assert s.workdir == Path("/cfg/work")
    assert s.source("workdir") == f"config {tmp_path / 'rocbuild.toml'}"
    assert (s.parallel, s.source("parallel")) == ("auto", "default")


def test_user_config_dir_is_read_when_no_local_file(tmp_path: Path) -> None:
    conf = tmp_path / "xdg" / "rocbuild"
    conf.mkdir(parents=True)
    (conf / "rocbuild.toml").write_text('[rocbuild]\nprefix = "/opt/mine"\n')
    s = resolve({}, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, cwd=tmp_path)
    assert s.prefix == Path("/opt/mine") and "xdg/rocbuild/rocbuild.toml" in s.source("prefix")


def test_mirror_rules_from_env_and_repeated_flags(tmp_path: Path) -> None:
    s = resolve({}, env={"ROCBUILD_MIRROR": "https://a/=file:///m/a/; https://b/=/m/b/"},
                cwd=tmp_path)
    assert s.mirror == (("https://a/", "file:///m/a/"), ("https://b/", "/m/b/"))
    s = resolve({"mirror": ["https://a/=/x/", "https://a/b/=/y/"]}, env={}, cwd=tmp_path)
    assert rewrite_url("https://a/b/c.git", s.mirror) == "/y/c.git"  # longest prefix wins
    assert rewrite_url("https://a/c.git", s.mirror) == "/x/c.git"
    assert rewrite_url("https://z/c.git", s.mirror) == "https://z/c.git"


@pytest.mark.parametrize("flags, env, message", [
    ({"jobs": "abc"}, {}, "flag --jobs: 'abc' is not a whole number"),
    ({}, {"ROCBUILD_JOBS": "0"}, "env ROCBUILD_JOBS: 0 is not a positive number"),
    ({"target": "gfx9060"}, {}, "flag --target: 'gfx9060' is not a GPU processor"),
    ({}, {"ROCBUILD_MIRROR": "nope"}, "env ROCBUILD_MIRROR: mirror rule 'nope' is not FROM=TO"),
    ({}, {"ROCBUILD_SWAP_WEIGHT": "2"}, "env ROCBUILD_SWAP_WEIGHT: 2.0 is not between 0 and 1"),
])
def test_bad_values_name_their_source(tmp_path: Path, flags: dict, env: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(flags, env=env, cwd=tmp_path)
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_config_file_errors_name_file_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "rocbuild.toml"
    cfg.write_text("jbos = 3\n")
    with pytest.raises(ConfigError, match=r"rocbuild.toml: key 'jbos' is not a setting \(known"
                       r".*\)\. Did you mean 'jobs'\?"):
        resolve({}, env={}, cwd=tmp_path)
    cfg.write_text("jobs = [\n")
    with pytest.raises(ConfigError, match=r"rocbuild\.toml: invalid TOML"):
        resolve({}, env={}, cwd=tmp_path)
    cfg.write_text("jobs = true\n")
    with pytest.raises(ConfigError, match=r"rocbuild\.toml: key 'jobs'"):
        resolve({}, env={}, cwd=tmp_path)


def test_settings_has_one_typed_field_per_option_and_defaults_come_from_the_options(
        tmp_path: Path) -> None:
    import dataclasses
    import typing

    from rocbuild.model import settings as settings_module
    fields = [f.name for f in dataclasses.fields(settings_module.Settings)
              if f.name not in ("sources", "notes", "warnings", "refused_overlay", "config")]
    assert fields == [o.name for o in settings_module.OPTIONS]
    hints = typing.get_type_hints(settings_module.Settings)
    assert all(hints[name] is not typing.Any for name in fields)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    resolved = resolve({}, env=env, cwd=tmp_path)
    for option in settings_module.OPTIONS:
        assert resolved.source(option.name) == "default"
        assert getattr(resolved, option.name) == option.default_value(env), option.name
    assert resolved.workdir == tmp_path / "cache" / "rocbuild" and resolved.parallel == "auto"
    changed = resolved.with_value("jobs", 3, "test")
    assert (changed.jobs, changed.source("jobs"), resolved.jobs) == (3, "test", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.jobs = 2  # type: ignore[misc]
    with pytest.raises(KeyError):
        resolved.with_value("job", 3, "test")


def test_parallel_is_a_count_or_auto() -> None:
    """--parallel auto (the default) leaves the count to the run (run/engine/parallel.py)."""
    assert resolve({"parallel": "AUTO"}).parallel == "auto"
    assert resolve({"parallel": "3"}).parallel == 3
    with pytest.raises(ConfigError, match="give a count or 'auto'"):
        resolve({"parallel": "many"})
