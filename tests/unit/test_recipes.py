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


def test_the_recipe_schema_is_declared_once_on_the_recipe_fields(tmp_path: Path) -> None:
    """Every Recipe/SourceSpec field names its key: RECIPE_SCHEMA, the build
    table's keys and load_recipe's defaults come from that one declaration, so a recipe that
    sets every key sets every field, and one that sets none gets the declared defaults."""
    import dataclasses

    from rocbuild.model import recipes

    samples = {"str": ("x", '"x"'), "bool": (True, "true"), "strlist": (("a",), '["a"]'),
               "strmap": ({"bin/a": "b"}, '{ "bin/a" = "b" }'), "size": (2 << 30, '"2GiB"'),
               "float": (1.5, "1.5"), "envmap": ({"A_B": ("x", "", "")}, '{ A_B = "x" }')}
    lines, expected = ['kind = "cmake"'], {}
    tables: dict[str, list[str]] = {}
    for cls, prefix in ((recipes.Recipe, ""), (recipes.SourceSpec, "source.")):
        for name, path, tag in recipes._declared(cls):
            if tag is None or name in ("kind", "from_component", "refs", "runpath",
                                       "install_prefix", "system_checks"):
                continue  # kind is set above; the rest are exclusive or need a partner
            full = (prefix + path).replace(recipes.BUILD_TABLE, "cmake")
            *table, key = full.split(".")
            if isinstance(tag, dict):  # resources: one value per key
                for sub, subtag in tag.items():
                    tables.setdefault(full, []).append(f"{sub} = {samples[subtag][1]}")
                expected[name] = {sub: samples[subtag][0] for sub, subtag in tag.items()}
                continue
            value, text = samples[tag]
            if name == "git":
                value, text = "https://example.com/x.git", '"https://example.com/x.git"'
            if name in ("python_packages", "python_wheels"):
                value, text = ("numpy==1.26.4",), '["numpy==1.26.4"]'
            if name == "depends":
                value, text = (), "[]"
            if name == "gpu_shape":
                value, text = "bundles", '"bundles"'
            (tables.setdefault(".".join(table), []) if table else lines).append(f"{key} = {text}")
            expected[name] = value
    text = "\n".join(lines) + "\n" + "".join(
        f"[{table}]\n" + "\n".join(body) + "\n" for table, body in tables.items())
    file = tmp_path / "every.toml"
    file.write_text(text)
    recipe = recipes.load_recipe(file)
    got = {**dataclasses.asdict(recipe), **dataclasses.asdict(recipe.source)}
    for name, value in expected.items():
        assert got[name] == value, (name, text)
    (tmp_path / "bare.toml").write_text('[source]\ngit = "https://e.com/x.git"\nref = "v1"\n'
                                        "[cmake]\n")
    bare = recipes.load_recipe(tmp_path / "bare.toml")
    for f in dataclasses.fields(recipes.Recipe):
        if "tag" in f.metadata:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            assert getattr(bare, f.name) == default, f.name
    assert recipes.recipe_schema()["cmake"] == recipes.BUILD_TABLE_SCHEMA


def test_a_build_system_reading_an_undeclared_key_is_a_programming_error() -> None:
    from rocbuild.model import recipes
    from tests.support.make_system import Make, registered

    class Odd(Make):
        kind, table, keys = "odd", "odd", ("args", "flavour")

    with registered(Odd()), pytest.raises(TypeError, match="flavour"):
        recipes.recipe_schema()
