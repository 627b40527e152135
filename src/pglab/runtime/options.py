"""Settings dataclasses on the command line: each field's docstring, and one option per field."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import typing
from typing import Any


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring under it in ``cls``'s source (CleanRL-style dataclasses)."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {stmt.target.id: str(nxt.value.value) for stmt, nxt in zip(body, body[1:])
            if isinstance(stmt, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)}


def _parser_of(kind: Any, name: str):
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects {kind.__name__}, got {text!r}") from None
    parse.__name__ = name
    return parse


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """One ``--field-name`` option per field of ``cls`` (int, float, str or bool), its docstring as the help."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    for f in dataclasses.fields(cls):
        kind, option = hints[f.name], f"--{f.name.replace('_', '-')}"
        if kind is bool:
            parser.add_argument(option, dest=f.name, action=argparse.BooleanOptionalAction, default=f.default,
                                help=docs.get(f.name, ""))
        else:
            parser.add_argument(option, dest=f.name, type=_parser_of(kind, kind.__name__), default=f.default,
                                help=f"{docs.get(f.name, '')} (default {f.default})")


def from_options(cls: type, args: argparse.Namespace) -> Any:
    """An instance of ``cls`` from the parsed options of :func:`add_options`."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


__all__ = ["add_options", "field_docs", "from_options"]
