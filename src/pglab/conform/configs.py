"""A framework's own config, read in its own format with its defaults, for ``pglab conform``.

- TRL: GRPOConfig or RLOOConfig fields as YAML or JSON, built into the real trl config object (on the CPU:
  ``use_cpu`` True and ``bf16`` False unless the file says otherwise, so that TrainingArguments accepts the machine);
- verl: its hydra YAML (``actor_rollout_ref.actor.*``, ``algorithm.*``) merged over the default trainer YAML the
  installed verl ships (``verl/trainer/config/_generated_ppo_trainer.yaml``), with omegaconf when it imports, else
  a plain YAML merge (``FrameworkConfig.source`` says which);
- OpenRLHF: its train_ppo_ray.py command-line arguments (a file of them, and ``--set``), parsed by the script's own
  argparse parser, built from the script's source (it sits under ``if __name__ == "__main__"``), then
  ``openrlhf.utils.config.hierarchize``.
Every bad key is one SettingsError line naming the close ones.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import textwrap
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from pglab.conform import frameworks
from pglab.runtime.options import SettingsError

FRAMEWORK_NAMES = ("trl", "verl", "openrlhf")
"""The frameworks ``pglab conform`` reads."""
TRL_TRAINERS = {"grpo": ("GRPOConfig", "GRPOTrainer"), "rloo": ("RLOOConfig", "RLOOTrainer")}
"""--trainer -> (the TRL config class read, the trainer whose code runs)."""
VERL_DEFAULTS = Path("trainer") / "config" / "_generated_ppo_trainer.yaml"
"""verl's full default trainer config, relative to the installed verl package."""
CPU_DEFAULTS = {"use_cpu": True, "bf16": False, "report_to": "none"}
"""TRL TrainingArguments the CPU needs (bf16 defaults to True, which refuses a machine without a GPU)."""


@dataclass(frozen=True)
class FrameworkConfig:
    """A framework's config as its own code reads it."""

    framework: str
    """One of FRAMEWORK_NAMES."""
    native: Any
    """trl GRPOConfig/RLOOConfig; verl's merged config as a nested dict; OpenRLHF's hierarchized Namespace."""
    trainer: str
    """The trainer whose loss runs: TRL 'GRPOTrainer' or 'RLOOTrainer'; verl and OpenRLHF 'actor'."""
    beta: float
    """The KL coefficient the config sets (the beta of the objective J the audit compares with)."""
    source: str
    """How it was read: the class or parser, the defaults merged, the file."""
    modules: Any
    """The framework's loaded modules (``pglab.conform.frameworks``)."""


def close_ones(key: str, known: list[str]) -> str:
    """', did you mean a, b?' for the known keys close to ``key`` ('' when none is)."""
    near = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(near)}?" if near else ""


def read_mapping(path: Path) -> dict:
    """A YAML or JSON file holding a mapping -> dict; SettingsError otherwise."""
    try:
        text = path.read_text()
    except OSError as error:
        raise SettingsError(f"--config {path}: cannot read it ({error.strerror}); pass an existing file") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise SettingsError(f"--config {path} is not valid {path.suffix[1:] or 'YAML'}: "
                            f"{' '.join(str(error).split())[:200]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(f"--config {path} holds a {type(data).__name__}; write KEY: VALUE lines (a mapping)")
    return data


def parse_value(text: str) -> Any:
    """--set VALUE as YAML reads it (4 -> int, true -> bool, [0.5, 5] -> list, anything else a string)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def load_modules(framework: str):
    modules = frameworks.LOADERS[framework]()
    if isinstance(modules, str):
        raise SettingsError(f"pglab conform {framework}: {modules}")
    return modules


def trl_config(path: Path | None, sets: dict[str, str], trainer: str = "grpo") -> FrameworkConfig:
    """The TRL config class of ``trainer`` built from the file's fields and --set (unknown key: SettingsError)."""
    if trainer not in TRL_TRAINERS:
        raise SettingsError(f"--trainer must be one of {', '.join(TRL_TRAINERS)}, got {trainer!r}")
    trl = load_modules("trl")
    config_name, trainer_name = TRL_TRAINERS[trainer]
    config_class = getattr(trl, config_name)
    values = (read_mapping(path) if path else {}) | {key: parse_value(text) for key, text in sets.items()}
    known = [f.name for f in fields(config_class) if f.init]
    for key in values:
        if key not in known:
            raise SettingsError(f"{config_class.__name__} has no field {key!r}{close_ones(key, known)}")
    try:
        native = config_class(**(CPU_DEFAULTS | values))
    except (ValueError, TypeError) as error:
        raise SettingsError(f"{config_class.__name__} refuses the config: {' '.join(str(error).split())[:300]}") \
            from None
    return FrameworkConfig("trl", native, trainer_name, float(native.beta),
                           f"trl {config_name}({path or 'defaults'}{', --set' if sets else ''})", trl)


def merge(base: dict, update: dict, where: str = "") -> dict:
    """update merged into base, recursively; a key base lacks is a SettingsError naming the close ones."""
    merged = dict(base)
    for key, value in update.items():
        if key not in base:
            raise SettingsError(f"verl's config has no key {where}{key}{close_ones(str(key), list(map(str, base)))}")
        if isinstance(base[key], dict) and isinstance(value, dict):
            merged[key] = merge(base[key], value, f"{where}{key}.")
        else:
            merged[key] = value
    return merged


def dotted(sets: dict[str, str]) -> dict:
    """{'a.b': '1'} -> {'a': {'b': 1}}."""
    tree: dict = {}
    for key, text in sets.items():
        node = tree
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = parse_value(text)
    return tree


def verl_tree(defaults_path: Path, user: dict, sets: dict[str, str]) -> tuple[dict, str]:
    """verl's defaults with the user's YAML and --set merged over them (omegaconf when it imports)."""
    try:
        from omegaconf import OmegaConf
        from omegaconf.errors import ConfigKeyError
    except ImportError:
        defaults = yaml.safe_load(defaults_path.read_text())
        return merge(merge(defaults, user), dotted(sets)), "a plain YAML merge (omegaconf is not importable)"
    defaults = OmegaConf.load(defaults_path)
    OmegaConf.set_struct(defaults, True)
    try:
        merged = OmegaConf.merge(defaults, OmegaConf.create(user), OmegaConf.create(dotted(sets)))
    except ConfigKeyError as error:
        key = str(getattr(error, "full_key", "") or error).split("\n")[0]
        merge(OmegaConf.to_container(defaults), user | dotted(sets))   # names the close ones
        raise SettingsError(f"verl's config refuses {key}") from None
    return OmegaConf.to_container(merged, resolve=True), "omegaconf merge"


def verl_config(path: Path | None, sets: dict[str, str]) -> FrameworkConfig:
    """verl's merged config (defaults from the installed package); beta is kl_loss_coef when use_kl_loss."""
    verl = load_modules("verl")
    defaults_path = verl.folder / VERL_DEFAULTS
    tree, how = verl_tree(defaults_path, read_mapping(path) if path else {}, sets)
    actor = tree["actor_rollout_ref"]["actor"]
    beta = float(actor["kl_loss_coef"]) if actor["use_kl_loss"] else 0.0
    return FrameworkConfig("verl", tree, "actor", beta,
                           f"{path or 'defaults'} over verl's {defaults_path.name} by {how}", verl)


def openrlhf_parser(script: Path) -> argparse.ArgumentParser:
    """train_ppo_ray.py's own parser: its ``__main__`` block from ArgumentParser() up to parse_args(), run."""
    source = script.read_text()
    start = source.rindex("\n", 0, source.index("parser = argparse.ArgumentParser()")) + 1
    end = source.rindex("\n", 0, source.index("args = parser.parse_args()", start)) + 1
    scope: dict[str, Any] = {"argparse": argparse, "datetime": datetime, "os": os}
    exec(textwrap.dedent(source[start:end]), scope)   # the script's own add_argument calls, unchanged
    return scope["parser"]


def openrlhf_argv(path: Path | None, sets: dict[str, str]) -> list[str]:
    """The arguments of an args file (shell syntax, # comments) and --set KEY=VALUE (true: the flag alone)."""
    argv = shlex.split(path.read_text(), comments=True) if path else []
    for key, text in sets.items():
        flag = "--" + key.removeprefix("--")
        if text.lower() in ("true", ""):
            argv.append(flag)
        elif text.lower() != "false":
            argv += [flag, *text.split()]
    return argv


def openrlhf_config(path: Path | None, sets: dict[str, str]) -> FrameworkConfig:
    """OpenRLHF's arguments through its own parser; beta is --algo.kl.init_coef."""
    openrlhf = load_modules("openrlhf")
    if path is not None and not path.is_file():
        raise SettingsError(f"--config {path}: no such file; pass a file of train_ppo_ray.py arguments")
    parser = openrlhf_parser(openrlhf.cli)
    namespace, unknown = parser.parse_known_args(openrlhf_argv(path, sets))
    if unknown:
        options = [o for action in parser._actions for o in action.option_strings]
        raise SettingsError(f"train_ppo_ray.py has no argument {unknown[0]}{close_ones(unknown[0], options)}")
    args = openrlhf.config.hierarchize(namespace)
    if args.actor.eps_clip_low_high is None:     # the script's own validation, after hierarchize
        args.actor.eps_clip_low_high = (args.actor.eps_clip, args.actor.eps_clip)
    threshold = list(args.algo.advantage.is_correction_threshold)
    args.algo.advantage.is_correction_threshold = [0.0, *threshold] if len(threshold) == 1 else threshold
    return FrameworkConfig("openrlhf", args, "actor", float(args.algo.kl.init_coef),
                           f"train_ppo_ray.py's argparse on {path or 'no file'}{' and --set' if sets else ''}",
                           openrlhf)


def read_config(framework: str, path: Path | None, sets: dict[str, str], trainer: str = "grpo") -> FrameworkConfig:
    """The framework's config read in its own format (see the module)."""
    if framework == "trl":
        return trl_config(path, sets, trainer)
    if framework == "verl":
        return verl_config(path, sets)
    if framework == "openrlhf":
        return openrlhf_config(path, sets)
    raise SettingsError(f"pglab conform takes one of {', '.join(FRAMEWORK_NAMES)}, got {framework!r}")
