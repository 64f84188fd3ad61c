from __future__ import annotations

from pathlib import Path

from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve

SRC = '[source]\ngit = "https://example.com/{{ name }}.git"\nref = "v1"\n'


def stack_of(folder: Path, *requested: str, **flags: object):
    return load_stack(resolve({"recipes": str(folder), **flags}, env={}, cwd=folder), requested)


def test_closure_and_deterministic_order(write_recipes) -> None:
    folder = write_recipes(
        stack='[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/p"\n'
              'components = ["z", "y", "x", "w"]\n',
        w=SRC + "[cmake]\n",
        x='depends = ["z"]\n' + SRC + "[cmake]\n",
        y=SRC + "[cmake]\n",
        z=SRC + "[cmake]\n",
    )
    assert stack_of(folder, "x").order == ("z", "x")
    # ties broken by stack.components order, not alphabetically
    assert stack_of(folder).order == ("z", "y", "x", "w")


def test_reused_checkout_adds_source_dependency(write_recipes, tmp_path: Path) -> None:
    folder = write_recipes(
        proj='kind = "source-only"\n' + SRC,
        sub='[source]\nfrom = "proj"\nsubdir = "amd/sub"\n[cmake]\nargs = ["-DP={{ src.proj }}"]\n',
    )
    stack = stack_of(folder, "sub", workdir=str(tmp_path / "w"))
    sub = stack.components["sub"]
    assert stack.order == ("proj", "sub")
    assert sub.checkout == "proj" and not sub.owns_checkout
    assert sub.source_dir == tmp_path / "w/src/proj/amd/sub"
    assert sub.build_args == (f"-DP={tmp_path / 'w/src/proj'}",)


def test_prefix_and_targets_render(write_recipes) -> None:
    args = '[cmake]\nargs = ["-DGPU_TARGETS={{ targets | join(\';\') }}"]\n'
    folder = write_recipes(a=SRC + args)
    stack = stack_of(folder, target="gfx906,gfx90a")
    assert stack.prefix == Path("/opt/rocm-6.4-gfx906-gfx90a")
    assert stack.components["a"].build_args == ("-DGPU_TARGETS=gfx906;gfx90a",)


def test_fingerprint_follows_options_patches_and_dependencies(write_recipes) -> None:
    def fingerprints(folder: Path) -> dict[str, str]:
        s = stack_of(folder)
        return {n: c.fingerprint for n, c in s.components.items()}

    base = dict(a=SRC + '[cmake]\nargs = ["-DX=1"]\n', b='depends = ["a"]\n' + SRC + "[cmake]\n",
                c=SRC + "[cmake]\n")
    first = fingerprints(write_recipes(**base))
    assert fingerprints(write_recipes(**base)) == first  # stable
    changed = fingerprints(write_recipes(a=SRC + '[cmake]\nargs = ["-DX=2"]\n'))
    assert changed["a"] != first["a"] and changed["b"] != first["b"] and changed["c"] == first["c"]
    patches = Path(write_recipes()).parent / "patches" / "c"
    patches.mkdir(parents=True)
    (patches / "0001-fix.patch").write_text("--- a\n+++ b\n")
    patched = fingerprints(write_recipes())
    assert patched["c"] != changed["c"] and patched["a"] == changed["a"]


def test_job_counts_do_not_change_fingerprints(write_recipes) -> None:
    folder = write_recipes(a=SRC + "[cmake]\n")
    one = stack_of(folder, jobs="1").components["a"].fingerprint
    assert stack_of(folder, jobs="8").components["a"].fingerprint == one


def test_mirror_rewrites_fetch_url_but_not_fingerprint(write_recipes) -> None:
    folder = write_recipes(a=SRC + "[cmake]\n")
    plain = stack_of(folder).components["a"]
    mirrored = stack_of(folder, mirror=["https://example.com/=file:///srv/"]).components["a"]
    assert mirrored.fetch_url == "file:///srv/a.git" and mirrored.url == plain.url
    assert mirrored.fingerprint == plain.fingerprint
