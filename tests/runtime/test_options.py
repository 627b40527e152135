"""Settings dataclasses on the command line: typed values, TRL's aliases, --resume [DIR], one-line errors."""

from dataclasses import dataclass
from typing import Literal

import pytest

from pglab.runtime.options import (
    Parser,
    RunOptions,
    SettingsError,
    add_options,
    as_options,
    check_folder,
    check_type,
    option,
    parse_value,
    settings,
)


@dataclass
class Toy:
    """A settings class as pglab writes them: a docstring under each field, checks in __post_init__."""

    max_steps: int = option(10, flag="steps", aliases=("max-steps",))
    """Optimiser steps."""
    rate: float = 0.5
    """Step size."""
    words: tuple[str, ...] = ()
    """Some words."""
    weights: tuple[float, ...] = (1.0,)
    """Some weights."""
    limit: int | None = None
    """A cap (None: none)."""
    flip: bool = False
    """A switch."""
    kind: Literal["a", "b"] = "a"
    """One of two."""
    output_dir: str | None = option(None, flag="out", aliases=("output-dir",))
    """The run folder."""
    resume: bool = False
    """Continue the run in --out."""

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise SettingsError(f"--steps must be at least 1, got {self.max_steps}")


def parse(*words: str, defaults=None) -> Toy:
    parser = Parser(prog="toy")
    add_options(parser, Toy, defaults=defaults)
    return settings(Toy, parser.parse_args(list(words)), defaults=defaults)


@pytest.mark.parametrize("text, annotation, value", [
    ("3", int, 3), ("2.5", float, 2.5), ("1e-3", float, 1e-3), ("nan", float, None), ("7", float, 7.0),
    ("hello", str, "hello"), ("None", str | None, None), ("4", int | None, 4), ("None", int | None, None),
    ("true", bool, True), ("No", bool, False), ("1,2", tuple[int, ...], (1, 2)), ("(0.1, 0.2)", tuple[float, ...],
    (0.1, 0.2)), ("3", tuple[float, ...], (3.0,)), ("", tuple[int, ...], ()), ("q_proj,v_proj", tuple[str, ...],
    ("q_proj", "v_proj")), ("((1, 2), (3, 4))", tuple[tuple[float, float], tuple[float, float]],
    ((1.0, 2.0), (3.0, 4.0))), ("b", Literal["a", "b"], "b"),
])
def test_text_becomes_the_annotated_type(text, annotation, value):
    parsed = parse_value(text, annotation)
    assert parsed == value or (value is None and parsed != parsed and annotation is float)
    assert type(parsed) is type(value) or value is None


@pytest.mark.parametrize("text, annotation, words", [
    ("two", int, "expects int, got 'two'"), ("1.5", int, "expects int"), ("True", int, "expects int"),
    ("x", float, "expects float"), ("maybe", bool, "expects bool"), ("c", Literal["a", "b"], "expects one of"),
    ("a,b", tuple[int, ...], "expects int"), ("(1, 2, 3)", tuple[float, float], "expects 2 values"),
])
def test_a_wrong_text_is_a_settings_error_naming_the_setting(text, annotation, words):
    with pytest.raises(SettingsError, match=words) as caught:
        parse_value(text, annotation, "exp: key")
    assert str(caught.value).startswith("exp: key expects") and isinstance(caught.value, ValueError)


def test_check_type_accepts_an_int_for_a_float_and_a_list_for_a_tuple():
    assert check_type("x", 3, float) == 3.0 and isinstance(check_type("x", 3, float), float)
    assert check_type("x", [1, 2], tuple[int, ...]) == (1, 2)
    with pytest.raises(SettingsError, match="x expects int, got True"):
        check_type("x", True, int)


def test_the_flag_and_trls_alias_set_the_same_field():
    assert parse("--steps", "4").max_steps == parse("--max-steps", "4").max_steps == 4
    assert parse("--out", "d").output_dir == parse("--output-dir", "d").output_dir == "d"
    assert parse().max_steps == 10 and parse().output_dir is None


def test_every_field_type_parses_from_the_command_line():
    toy = parse("--rate", "0.25", "--words", "a,b", "--weights", "1,2", "--limit", "None", "--flip", "--kind", "b")
    assert (toy.rate, toy.words, toy.weights, toy.limit, toy.flip, toy.kind) == (0.25, ("a", "b"), (1.0, 2.0), None,
                                                                                 True, "b")
    assert parse("--flip", "false").flip is False


def test_resume_takes_three_forms():
    defaults = {"output_dir": "runs/toy"}
    alone = parse("--resume", defaults=defaults)
    assert alone.resume and alone.output_dir == "runs/toy"                  # the run in the default folder
    named = parse("--resume", "runs/old", defaults=defaults)
    assert named.resume and named.output_dir == "runs/old"                 # the run in DIR
    both = parse("--out", "runs/x", "--resume", defaults=defaults)
    assert both.resume and both.output_dir == "runs/x"                     # the run in --out
    assert parse("--out", "runs/x", "--resume", "runs/x").output_dir == "runs/x"
    with pytest.raises(SettingsError, match="--resume runs/a and --out runs/b name two folders"):
        parse("--out", "runs/b", "--resume", "runs/a")


def test_bad_options_are_one_line_settings_errors():
    with pytest.raises(SettingsError, match=r"toy: argument --steps/--max-steps: expects int, got 'two'"):
        parse("--max-steps", "two")
    with pytest.raises(SettingsError, match="--steps must be at least 1"):
        parse("--steps", "0")
    with pytest.raises(SettingsError, match="unrecognized arguments: --step 3"):
        parse("--step", "3")                                                 # no abbreviations


def test_help_shows_the_docstring_the_default_and_the_alias():
    parser = Parser(prog="toy")
    add_options(parser, Toy, defaults={"output_dir": "runs/toy"})
    text = parser.format_help()
    assert "--steps N, --max-steps N" in text and "Optimiser steps. (default 10)" in text
    assert "--out TEXT, --output-dir TEXT" in text and "(default runs/toy)" in text and "--resume [DIR]" in text


def test_as_options_makes_the_same_settings_again():
    toy = parse("--steps", "4", "--words", "a,b", "--flip", "--out", "d", "--resume")
    words = as_options(toy, skip=("resume",))
    assert words == ["--steps", "4", "--words", "a,b", "--flip", "--out", "d"]
    assert parse(*words) == Toy(max_steps=4, words=("a", "b"), flip=True, output_dir="d")


def test_an_out_folder_that_is_a_file_or_unwritable_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(SettingsError, match="is a file; pass a folder"):
        RunOptions(out=str(tmp_path / "f"))
    with pytest.raises(SettingsError, match="cannot write in /proc"):
        check_folder("/proc/pglab-out")
    check_folder(tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()
