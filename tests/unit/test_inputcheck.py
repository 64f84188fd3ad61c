"""The load-time rules accept what real recipes use and refuse what git or exec would
misread (the refusals themselves are fed through the CLI in tests/e2e/test_bad_input.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.errors import ConfigError
from rocbuild.model import inputcheck


@pytest.mark.parametrize("ref", ["rocm-6.4.3", "v1", "release/rocm-rel-6.4", "b6900",
                                 "20240101", "0123456789abcdef0123456789abcdef01234567",
                                 "gfx906+fix@2"])
def test_real_refs_pass(ref: str) -> None:
    assert inputcheck.git_ref("f.toml", "source.ref", ref) == ref


@pytest.mark.parametrize("ref", ["-x", "--upload-pack=x", "a b", "a;b", "a..b", "a@{1}", "a/",
                                 "", "$(x)", "a\nb"])
def test_misreadable_refs_fail(ref: str) -> None:
    with pytest.raises(ConfigError, match=r"f\.toml: key 'source\.ref'"):
        inputcheck.git_ref("f.toml", "source.ref", ref)


@pytest.mark.parametrize("ref", ["d99724f2", "b520bc8", "0123456789abcdef0123456789abcdef0123456"])
def test_an_abbreviated_commit_is_refused_with_the_fix(ref: str) -> None:
    # git fetches a commit by its full id only: this would pass plan and fail at fetch
    with pytest.raises(ConfigError, match="abbreviated commit id") as info:
        inputcheck.git_ref("f.toml", "source.ref", ref)
    assert "git rev-parse" in (info.value.tip or "")


@pytest.mark.parametrize("url", ["https://github.com/ROCm/rocBLAS.git", "file:///srv/m/x.git",
                                 "git@github.com:ROCm/x.git", "ssh://git@host:22/x.git",
                                 "/srv/mirror/x.git"])
def test_real_urls_pass(url: str) -> None:
    assert inputcheck.git_url("f.toml", "source.git", url) == url


@pytest.mark.parametrize("url", ["-u", "ext::sh -c x", "fd::3", "https://a/b c", "https://a/`x`"])
def test_misreadable_urls_fail(url: str) -> None:
    with pytest.raises(ConfigError, match=r"source\.git"):
        inputcheck.git_url("f.toml", "source.git", url)


def test_links_inside_and_outside_the_prefix() -> None:
    prefix = Path("/opt/rocm")
    for rel, target in (("llvm", "lib/llvm"), ("bin/amdclang", "../lib/llvm/bin/clang"),
                        ("lib/x", "/opt/rocm/lib/y")):
        assert inputcheck.link_target_inside("f", "k", prefix, rel, target) == target
    for rel, target in (("lib/x", "../../etc"), ("x", "/tmp"), ("x", ".."), ("x", "/opt/rocm2")):
        with pytest.raises(ConfigError, match="outside the prefix"):
            inputcheck.link_target_inside("f", "k", prefix, rel, target)


def test_install_prefix_must_stay_below_the_prefix() -> None:
    prefix = Path("/opt/rocm")
    assert inputcheck.install_prefix_inside("f", "k", prefix, Path("/opt/rocm/lib/llvm"))
    for bad in ("/opt/rocm/../x", "/opt/rocm-other", "/usr"):
        with pytest.raises(ConfigError, match="not inside the prefix"):
            inputcheck.install_prefix_inside("f", "k", prefix, Path(bad))
