"""The shipped recipes of the PyTorch profile: each says the shape of its GPU code ([gpu]),
checks the same files verify and a base's [base] table name, and nothing of what does not
exist for gfx906 (hipBLASLt, composable_kernel, rocWMMA, hipSPARSELt) is built or switched on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocbuild.model.graph import load_stack
from rocbuild.model.recipes import load_recipes, provides_alternatives
from rocbuild.model.settings import resolve

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
SHAPES = ("bundles", "tensile", "host", "headers", "jit")
# what PyTorch links (stack.toml's pytorch profile), with the shape of each one's GPU code
EXPECTED_SHAPES = {
    "rocprim": "headers", "hipcub": "headers", "rocthrust": "headers",
    "rocrand": "bundles", "hiprand": "host",
    "rocsolver": "bundles", "hipsolver": "host",
    "rocsparse": "bundles", "hipsparse": "host",
    "rocfft": "jit", "hipfft": "host",
    "miopen": "jit", "rccl": "bundles",
}
# none of these exists for gfx906 (TheRock's per-target exclusions)
NOT_FOR_GFX906 = re.compile(r"HIPBLASLT|HIPSPARSELT|COMPOSABLE|ROCWMMA|_CK_", re.IGNORECASE)


def test_the_pytorch_profile_names_every_library_pytorch_links() -> None:
    stack = load_recipes(RECIPES).stack
    assert stack.profile == "llama.cpp"
    pytorch = set(stack.profiles["pytorch"].components)
    assert set(EXPECTED_SHAPES) | {"rocblas", "hipblas"} <= pytorch
    assert "llama.cpp" not in pytorch
    # today's default set is the llama.cpp profile, unchanged
    assert stack.profiles["llama.cpp"].components[-1] == "llama.cpp"


@pytest.mark.parametrize("name", sorted(EXPECTED_SHAPES))
def test_each_library_says_the_shape_of_its_gpu_code(name: str) -> None:
    recipe = load_recipes(RECIPES).recipes[name]
    assert recipe.gpu_shape == EXPECTED_SHAPES[name]
    if recipe.gpu_shape in ("bundles", "jit"):
        assert recipe.gpu_libraries, name
        # the file verify checks is the file that shows the library in a base
        provides = {alt for entry in recipe.base_provides for alt in provides_alternatives(entry)}
        first = provides_alternatives(recipe.gpu_libraries[0])
        assert set(first) <= provides, (name, first, provides)
    else:
        assert recipe.gpu_libraries == (), name
    # verify fails a built library of these shapes without code for the targets; [gpu]
    # replaces the older gpu_code spelling in the shipped recipes
    assert recipe.carries_gpu_code == (recipe.gpu_shape in ("bundles", "jit")), name
    assert not recipe.gpu_code, name


def test_nothing_that_has_no_gfx906_is_built_or_switched_on(tmp_path: Path) -> None:
    settings = resolve({"recipes": str(RECIPES), "workdir": str(tmp_path), "target": "gfx906",
                        "profile": "pytorch"}, env={"HOME": str(tmp_path)}, cwd=tmp_path)
    stack = load_stack(settings)
    assert not [n for n in stack.order if NOT_FOR_GFX906.search(n.replace("-", "_"))]
    for comp in stack.selected():
        for arg in comp.build_args:
            name, _, value = arg.removeprefix("-D").partition("=")
            if NOT_FOR_GFX906.search(name):
                assert value.upper() in ("OFF", "0", "FALSE"), (comp.name, arg)
    miopen = stack.components["miopen"].build_args
    for off in ("MIOPEN_USE_COMPOSABLEKERNEL", "MIOPEN_USE_HIPBLASLT", "MIOPEN_USE_MLIR"):
        assert f"-D{off}=OFF" in miopen
    assert "-DBUILD_WITH_HIPBLASLT=OFF" in stack.components["rocblas"].build_args
