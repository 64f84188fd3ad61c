"""Every recipe error class gives one message naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.errors import ConfigError
from rocbuild.model.graph import load_stack
from rocbuild.model.recipes import load_recipes, parse_size
from rocbuild.model.settings import resolve

OK_SOURCE = '[source]\ngit = "https://example.com/{{ name }}.git"\nref = "rocm-{{ version }}"\n'


def settings_for(folder: Path, **flags: object):
    return resolve({"recipes": str(folder), **flags}, env={}, cwd=folder)


def error_of(folder: Path, *requested: str, **flags: object) -> str:
    with pytest.raises(ConfigError) as info:
        load_stack(settings_for(folder, **flags), requested)
    assert info.value.exit_code == 2
    return str(info.value)


def test_unknown_key_names_file_key_and_suggests(write_recipes) -> None:
    folder = write_recipes(a=OK_SOURCE + "[cmake]\nargz = []\n")
    message = error_of(folder)
    assert message.startswith(f"{folder / 'a.toml'}: key 'cmake.argz' is not allowed in [cmake]")
    assert "Did you mean 'args'?" in message


def test_unknown_top_level_key(write_recipes) -> None:
    folder = write_recipes(a='sumary = "x"\n' + OK_SOURCE + "[cmake]\n")
    assert "a.toml: key 'sumary' is not allowed in a recipe's top level" in error_of(folder)


@pytest.mark.parametrize("text, fragment", [
    ('depends = "b"\n' + OK_SOURCE + "[cmake]\n", "key 'depends' must be a list of strings"),
    (OK_SOURCE + "[cmake]\nargs = [1]\n", "key 'cmake.args' must be a list of strings"),
    (OK_SOURCE + "submodules = 'yes'\n[cmake]\n", "key 'source.submodules' must be true or false"),
    (OK_SOURCE + '[cmake]\n[resources]\ncompile_mem = "lots"\n',
     "key 'resources.compile_mem': 'lots' is not a size"),
    (OK_SOURCE + "[cmake]\n[env]\nX = 1\n", "key 'env.X' must be a string"),
    ('cmake = 3\n' + OK_SOURCE, "key 'cmake' must be a table"),
    (OK_SOURCE + '[cmake]\ndistribute = "yes"\n', "key 'cmake.distribute' must be true or false"),
])
def test_wrong_types(write_recipes, text: str, fragment: str) -> None:
    folder = write_recipes(a=text)
    assert fragment in error_of(folder)


def test_invalid_toml_names_file(write_recipes) -> None:
    folder = write_recipes(a="[source\n")
    assert f"{folder / 'a.toml'}: invalid TOML" in error_of(folder)


def test_missing_source_and_build_section(write_recipes) -> None:
    assert "a.toml: key 'source' is missing" in error_of(write_recipes(a="[cmake]\n"))
    folder = write_recipes(folder="r2", a=OK_SOURCE)
    assert "a.toml: a cmake component needs a [cmake] table" in error_of(folder)
    folder = write_recipes(folder="r3", a='[source]\ngit = "x"\n[cmake]\n')
    assert "a.toml: key 'source.ref' is missing" in error_of(folder)


def test_unknown_dependency_suggests_the_close_name(write_recipes) -> None:
    folder = write_recipes(tensile='kind = "source-only"\n' + OK_SOURCE,
                           rocblas='depends = ["tensil"]\n' + OK_SOURCE + "[cmake]\n")
    message = error_of(folder)
    assert "rocblas.toml: key 'depends': unknown component 'tensil'" in message
    assert "Did you mean 'tensile'?" in message


def test_cycle_is_printed(write_recipes) -> None:
    folder = write_recipes(
        a='depends = ["c"]\n' + OK_SOURCE + "[cmake]\n",
        b='depends = ["a"]\n' + OK_SOURCE + "[cmake]\n",
        c='depends = ["b"]\n' + OK_SOURCE + "[cmake]\n",
    )
    assert "dependency cycle: a -> c -> b -> a" in error_of(folder)


def test_undefined_template_variable(write_recipes) -> None:
    folder = write_recipes(a=OK_SOURCE + '[cmake]\nargs = ["-DX={{ tarets }}"]\n')
    message = error_of(folder)
    assert "a.toml: key 'cmake.args[0]': undefined template variable" in message
    assert "'tarets' is undefined" in message and "targets" in message


def test_source_folder_of_a_non_dependency_is_undefined(write_recipes) -> None:
    folder = write_recipes(b='kind = "source-only"\n' + OK_SOURCE,
                           a=OK_SOURCE + '[cmake]\nargs = ["-DB={{ src.b }}"]\n')
    assert "a.toml: key 'cmake.args[0]': undefined template variable" in error_of(folder)


def test_malformed_target_in_stack_file(write_recipes) -> None:
    folder = write_recipes(stack='[stack]\nversion = "6.4.3"\ntargets = ["gfx9060"]\n'
                                 'prefix = "/opt/x"\n', a=OK_SOURCE + "[cmake]\n")
    message = error_of(folder)
    assert "stack.toml: key 'stack.targets': 'gfx9060' is not a GPU processor" in message


def test_unknown_requested_component(write_recipes) -> None:
    folder = write_recipes(rocblas=OK_SOURCE + "[cmake]\n")
    assert "unknown component 'rocblsa'" in error_of(folder, "rocblsa")


def test_engine_owned_arguments_are_refused(write_recipes) -> None:
    folder = write_recipes(a=OK_SOURCE + '[cmake]\nargs = ["-DCMAKE_INSTALL_PREFIX=/usr"]\n')
    assert "a.toml: key 'cmake.args[0]'" in error_of(folder)


def test_reused_checkout_rules(write_recipes) -> None:
    folder = write_recipes(proj='kind = "source-only"\n' + OK_SOURCE,
                           a='[source]\nfrom = "proj"\nref = "x"\n[cmake]\n')
    assert "a.toml: key 'source.ref' cannot be combined with 'source.from'" in error_of(folder)
    folder = write_recipes(folder="r2", proj='kind = "source-only"\n' + OK_SOURCE,
                           a='[source]\nfrom = "prj"\n[cmake]\n')
    assert "key 'source.from': unknown component 'prj'" in error_of(folder)


def test_missing_stack_file(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert "no stack.toml here" in error_of(tmp_path / "empty")


def test_sizes() -> None:
    assert parse_size("2GiB") == 2 << 30
    assert parse_size("512 MiB") == 512 << 20
    assert parse_size("1.5G") == int(1.5 * (1 << 30))
    with pytest.raises(ValueError):
        parse_size("2 gallons")


def test_shipped_recipes_load_and_validate() -> None:
    recipes = load_recipes(Path(__file__).resolve().parents[2] / "recipes")
    assert {"llvm", "clr", "rocblas", "hipblas", "llama.cpp"} <= set(recipes.recipes)
