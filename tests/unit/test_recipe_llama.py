"""llama.cpp reports its release's build number, not the 1 of a shallow fetch."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from tests.conftest import RecipeWriter


@pytest.mark.parametrize("name", ["llama.cpp", "llama.cpp-vulkan"])
def test_llama_cpp_gets_the_build_number_of_its_release_tag(name: str, tmp_path: Path) -> None:
    stack = load_stack(resolve({"workdir": str(tmp_path)}, env={}), [name])
    comp = stack.components[name]
    assert comp.ref is not None and comp.ref.startswith("b")
    assert f"-DLLAMA_BUILD_NUMBER={comp.ref[1:]}" in comp.build_args


def test_a_commit_pin_gives_no_made_up_build_number(tmp_path: Path,
                                                     write_recipes: RecipeWriter) -> None:
    recipe_text = (Path(__file__).resolve().parents[2] / "recipes" / "llama.cpp.toml").read_text()
    text = recipe_text.replace('ref = "b6900"', 'ref = "' + "a" * 40 + '"').replace(
        'depends = ["hipblas", "rocblas", "clr"]', "depends = []")
    folder = write_recipes(files={"llama.cpp": text})
    stack = load_stack(resolve({"workdir": str(tmp_path), "recipes": str(folder)}, env={}),
                       ["llama.cpp"])
    assert "-DLLAMA_BUILD_NUMBER=0" in stack.components["llama.cpp"].build_args


def test_llama_cpp_builds_portable_cpu_code(tmp_path: Path) -> None:
    """GGML_NATIVE (default ON) compiles for the build host's CPU while the binary cache key
    records only the machine name: the recipe builds every CPU variant as a
    backend module instead, and ggml loads the best one where it runs."""
    args = load_stack(resolve({"workdir": str(tmp_path)}, env={}),
                      ["llama.cpp"]).components["llama.cpp"].build_args
    assert {"-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON"} <= set(args)
    assert "-DBUILD_SHARED_LIBS=OFF" not in args  # GGML_BACKEND_DL requires shared libraries
