"""Settings on the command line: one typed option per field of a settings dataclass, and the error a user can fix.

A settings class is a dataclass with a docstring under each field (CleanRL-style) that checks itself when it
is made. :func:`add_options` gives each field one option, ``--field-name`` or the ``flag`` of its metadata
(:func:`option`), also spelled as the metadata's ``aliases`` (TRL's names), typed by the field's annotation
and documented by its docstring; :func:`settings` makes the instance from the parsed options. A ``resume``
field next to an ``--out`` field is ``--resume [DIR]``: alone, continue the run in ``--out``; with DIR,
continue the run in DIR. :func:`parse_value` is the one parser of a typed value from text, shared by the
options and by ``pglab reproduce --set KEY=VALUE``.

:class:`SettingsError` is what every check of a user's input raises (options, files, model folders, and what
the user's own environment, reward or loss returns): ``pglab`` prints it as one line and exits with status 2.
It is a ValueError, so library callers catch it as before; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import os
import tempfile
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
"""The words a bool option accepts (any case)."""
OUT = "out"
"""The flag of a run's output folder; ``--resume DIR`` writes DIR into the field that has it."""


class SettingsError(ValueError):
    """A bad setting or input that the user can fix: one line that says what to pass instead (exit status 2)."""


def option(default: Any, *, flag: str | None = None, aliases: tuple[str, ...] = ()) -> Any:
    """A dataclass field whose option is ``--flag`` (default: the field's name), also spelled ``--alias``."""
    return dataclasses.field(default=default, metadata={"flag": flag, "aliases": aliases})


def flag_of(cls: type, name: str) -> str:
    """The option of field ``name`` of ``cls``: ``--steps`` for RLConfig's max_steps."""
    spelled = next(f.metadata.get("flag") for f in dataclasses.fields(cls) if f.name == name)
    return "--" + (spelled or name).replace("_", "-")


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring under it, in ``cls``'s source and its dataclass bases'."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(inspect.getsource(klass)).body[0].body
        docs.update({stmt.target.id: str(nxt.value.value) for stmt, nxt in zip(body, body[1:])
                     if isinstance(stmt, ast.AnnAssign) and isinstance(nxt, ast.Expr)
                     and isinstance(nxt.value, ast.Constant)})
    return docs


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _members(annotation: Any) -> tuple[Any, ...]:
    """The types of a union (``int | None`` -> int, NoneType), or the annotation alone."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return typing.get_args(annotation) if union else (annotation,)


def check_type(label: str, value: Any, annotation: Any) -> Any:
    """``value`` as the type ``annotation`` names (int -> float and list -> tuple are accepted); SettingsError else."""
    wrong = SettingsError(f"{label} expects {_type_name(annotation)}, got {value!r}".strip())
    if len(_members(annotation)) > 1:
        for member in _members(annotation):
            try:
                return check_type(label, value, member)
            except SettingsError:
                pass
        raise wrong
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        if value in args:
            return value
        raise SettingsError(f"{label} expects one of {list(args)}, got {value!r}".strip())
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"{label} expects a tuple such as (1, 2), got {value!r}".strip())
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            kind = args[0] if args else Any
            return origin(check_type(label, v, kind) for v in value)
        if len(args) != len(value):
            raise SettingsError(f"{label} expects {len(args)} values, got {len(value)}".strip())
        return tuple(check_type(label, v, a) for v, a in zip(value, args))
    if annotation is type(None):
        if value is None:
            return None
    elif annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is Any or isinstance(value, origin or annotation):
        return value
    raise wrong


def _from_text(text: str, annotation: Any) -> Any:
    """The Python value ``text`` spells for ``annotation``, before the type check (see :func:`parse_value`)."""
    members = _members(annotation)
    if type(None) in members and text.strip() in ("None", "none"):
        return None
    for member in members:
        origin = typing.get_origin(member)
        if member is str:
            return text
        if member is bool and text.strip().lower() in TRUE + FALSE:
            return text.strip().lower() in TRUE
        if member in (int, float):
            try:
                return member(text)
            except ValueError:
                continue
        if origin is typing.Literal:
            matches = [v for v in typing.get_args(member) if str(v) == text.strip()]
            if matches:
                return matches[0]
        if origin in (tuple, list):
            try:
                value = ast.literal_eval(text) if text.strip() else ()
            except (ValueError, SyntaxError):
                value = [word.strip() for word in text.split(",") if word.strip()]      # words: a,b,c
            return value if isinstance(value, (tuple, list)) else (value,)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_value(text: str, annotation: Any, label: str = "") -> Any:
    """Command-line text as a value of ``annotation``: str as written; int, float; bool from true/false, yes/no,
    on/off, 1/0; None from "None"; a tuple from "1,2", "(1, 2)" or one value; else a Python literal.
    SettingsError naming ``label`` when the text is not such a value."""
    return check_type(label, _from_text(text, annotation), annotation)


def _typed(annotation: Any, flag: str):
    """The argparse ``type`` of an option: text -> value, or argparse's one-line error."""
    def parse(text: str) -> Any:
        try:
            return parse_value(text, annotation)
        except SettingsError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    parse.__name__ = flag
    return parse


def _resumable(cls: type) -> bool:
    names = {f.name: f.metadata.get("flag") or f.name for f in dataclasses.fields(cls)}
    return "resume" in names and OUT in names.values()


def _metavar(annotation: Any) -> str:
    """N for a whole number, X for a number, A,B for a tuple, the choices of a Literal (a|b), TEXT otherwise."""
    kinds = [m for m in _members(annotation) if m is not type(None)]
    if typing.get_origin(kinds[0]) is typing.Literal:
        return "|".join(map(str, typing.get_args(kinds[0])))
    if typing.get_origin(kinds[0]) in (tuple, list):
        return "A,B"
    return {int: "N", float: "X"}.get(kinds[0], "TEXT")


def _default_text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def add_options(parser: argparse.ArgumentParser, cls: type, *, defaults: Mapping[str, Any] | None = None) -> None:
    """One option per field of the settings class ``cls``, its docstring and default as the help.

    ``defaults`` replaces a field's default on this command (train-lm writes to runs/train-lm; the library, nowhere).
    An option not given is absent from the parsed namespace, so that :func:`settings` passes only what was typed.
    """
    hints, docs, defaults = typing.get_type_hints(cls), field_docs(cls), dict(defaults or {})
    for f in dataclasses.fields(cls):
        flag = flag_of(cls, f.name)
        names = [flag, *(f"--{alias}" for alias in f.metadata.get("aliases", ()))]
        default = defaults.get(f.name, f.default)
        help_text = f"{docs.get(f.name, '')} (default {_default_text(default)})"
        common = {"dest": f.name, "default": argparse.SUPPRESS, "help": help_text}
        if f.name == "resume" and _resumable(cls):
            parser.add_argument(*names, nargs="?", const=True, metavar="DIR", **common)
        elif hints[f.name] is bool:
            parser.add_argument(*names, nargs="?", const=True, type=_typed(bool, flag), metavar="true|false",
                                **common)
        else:
            parser.add_argument(*names, type=_typed(hints[f.name], flag), metavar=_metavar(hints[f.name]), **common)


def settings(cls: type, args: argparse.Namespace, *, defaults: Mapping[str, Any] | None = None) -> Any:
    """The instance of ``cls`` from the options :func:`add_options` parsed (its own checks run here, once).

    ``--resume DIR`` becomes resume=True with DIR as the out folder (refused when --out names another folder).
    """
    names = [f.name for f in dataclasses.fields(cls)]
    values = {**{k: v for k, v in (defaults or {}).items() if k in names},
              **{name: getattr(args, name) for name in names if hasattr(args, name)}}
    if isinstance(values.get("resume"), str):
        out = next(f.name for f in dataclasses.fields(cls) if (f.metadata.get("flag") or f.name) == OUT)
        folder = values["resume"]
        if hasattr(args, out) and getattr(args, out) != folder:
            raise SettingsError(f"--resume {folder} and --out {getattr(args, out)} name two folders; pass one of them")
        values.update({out: folder, "resume": True})
    return cls(**values)


def as_options(instance: Any, *, skip: tuple[str, ...] = ()) -> list[str]:
    """The command-line words that make ``instance`` again from its class's defaults, fields in ``skip`` left out."""
    words = []
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        if f.name in skip or (f.default is not dataclasses.MISSING and value == f.default):
            continue
        flag = flag_of(type(instance), f.name)
        words += [flag] if value is True else [flag, _default_text(value)]
    return words


def check_folder(path: str | Path, flag: str = "--out") -> None:
    """Refuse a folder option that names a file or a place that cannot be written (nothing is created)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SettingsError(f"{flag} {path} is a file; pass a folder (it is created if missing)")
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    try:
        if not existing.is_dir():
            raise OSError
        handle, probe = tempfile.mkstemp(prefix=".pglab-probe-", dir=existing)   # root ignores access bits: try it
        os.close(handle)
        os.unlink(probe)
    except OSError:
        raise SettingsError(f"{flag} {path}: cannot write in {existing}; pass a folder you can write to") from None


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (SettingsError) and no abbreviated options (``--seed`` is not ``--seeds``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message: str) -> typing.NoReturn:
        raise SettingsError(f"{self.prog}: {message}; see {self.prog} --help")


@dataclasses.dataclass
class RunOptions:
    """Where a training command writes, whether it continues a stopped run there, and at which size."""

    out: str | None = option(None, aliases=("output-dir",))
    """The run folder: logs, checkpoints, the report and the trained policy (None: runs/COMMAND)."""
    resume: bool = False
    """Continue the stopped run in --out (--resume DIR: the run in DIR) from its checkpoint, with its settings."""
    quick: bool = False
    """Reduced size: a first look in seconds (what CI runs)."""

    def __post_init__(self) -> None:
        if self.out is not None:
            check_folder(self.out)


__all__ = ["Parser", "RunOptions", "SettingsError", "add_options", "as_options", "check_folder", "check_type",
           "field_docs", "flag_of", "option", "parse_value", "settings"]
