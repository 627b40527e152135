"""The installed frameworks' own modules, imported for ``pglab conform`` and the peer tests, and their versions.

TRL comes from the venv (the ``conform`` extra). verl and OpenRLHF pin GPU stacks, so ``make`` installs their wheels
and the few pure-Python modules their algorithm files import, without dependencies, into ``<venv>/peers``
(the Makefile's ``$(VENV)/.peers``); only these loaders put that folder on sys.path (at its end, so the venv's own
packages win). OpenRLHF's package ``__init__`` files import flash-attn, DeepSpeed and Ray, which its loss, reward and
advantage functions never call: empty stand-ins for those modules let the algorithm files import and run unchanged.
Each loader returns a namespace of modules, or a one-line reason (a str) that names the install step.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import sys
import types
from pathlib import Path

PEERS = Path(sys.prefix) / "peers"
"""Where the Makefile installs verl and OpenRLHF."""

DISTRIBUTIONS = {"trl": "trl", "verl": "verl", "openrlhf": "openrlhf"}
"""Framework -> the distribution whose version ``pglab conform`` reports."""


def peer_path() -> None:
    """Put PEERS on sys.path (last) when it exists."""
    if PEERS.is_dir() and str(PEERS) not in sys.path:
        sys.path.append(str(PEERS))


def version(framework: str) -> str | None:
    """The installed version of ``framework`` (importlib.metadata, PEERS included), or None when absent."""
    peer_path()
    try:
        return importlib.metadata.version(DISTRIBUTIONS[framework])
    except importlib.metadata.PackageNotFoundError:
        return None


def trl() -> types.SimpleNamespace | str:
    """trl.trainer.grpo_trainer, rloo_trainer, utils and the two configs, or a one-line reason they are absent."""
    try:
        return types.SimpleNamespace(grpo=importlib.import_module("trl.trainer.grpo_trainer"),
                                     rloo=importlib.import_module("trl.trainer.rloo_trainer"),
                                     utils=importlib.import_module("trl.trainer.utils"),
                                     GRPOConfig=importlib.import_module("trl.trainer.grpo_config").GRPOConfig,
                                     RLOOConfig=importlib.import_module("trl.trainer.rloo_config").RLOOConfig)
    except ImportError as error:
        return f"TRL is not installed ({error}): `pip install -e .[conform]` (or `make`) installs it"


def verl() -> types.SimpleNamespace | str:
    """verl's core_algos, rollout_corr_helper and its actor/algorithm configs, or a one-line reason they are absent."""
    peer_path()
    try:
        core = importlib.import_module("verl.trainer.ppo.core_algos")
        corr = importlib.import_module("verl.trainer.ppo.rollout_corr_helper")
        config = importlib.import_module("verl.workers.config")
        algorithm = importlib.import_module("verl.trainer.config.algorithm")
    except ImportError as error:
        return f"verl is not importable ({error}): `make .venv/.peers` installs it into {PEERS}"
    return types.SimpleNamespace(core=core, corr=corr, ActorConfig=config.ActorConfig,
                                 PolicyLossConfig=config.PolicyLossConfig,
                                 RolloutCorrectionConfig=algorithm.RolloutCorrectionConfig,
                                 folder=Path(core.__file__).parents[2])


def stand_ins(names: list[str]) -> list[str]:
    """Empty modules for those of ``names`` that do not import; returns the ones it made."""
    made = []
    for name in names:
        if name in sys.modules or importlib.util.find_spec(name.split(".")[0]) is not None:
            continue
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__spec__ = importlib.machinery.ModuleSpec(name, None)
        made.append(name)
    return made


def package_without_init(name: str) -> None:
    """Register package ``name`` by its folder, so its modules import without running its __init__.py."""
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__path__ = [str(PEERS.joinpath(*name.split(".")))]
        sys.modules[name] = module


def openrlhf() -> types.SimpleNamespace | str:
    """OpenRLHF's models.loss, models.utils, the experience maker and utils.config, or a one-line reason.

    The stand-ins leave sys.modules once the algorithm modules are imported (accelerate, for one, looks up
    deepspeed's spec), so nothing else sees them."""
    peer_path()
    if not (PEERS / "openrlhf").is_dir():
        return f"OpenRLHF is not installed: `make .venv/.peers` installs it into {PEERS}"
    for name in ("openrlhf.models", "openrlhf.utils", "openrlhf.trainer.ray"):
        package_without_init(name)
    made = stand_ins(["deepspeed", "ray"])
    launcher = "openrlhf.trainer.ray.launcher"
    if launcher not in sys.modules:   # the Ray launcher itself is never imported
        sys.modules[launcher] = types.ModuleType(launcher)
        sys.modules[launcher].RayActorGroup = object
        made.append(launcher)
    try:
        return types.SimpleNamespace(loss=importlib.import_module("openrlhf.models.loss"),
                                     utils=importlib.import_module("openrlhf.models.utils"),
                                     maker=importlib.import_module("openrlhf.trainer.ppo_utils.experience_maker"),
                                     config=importlib.import_module("openrlhf.utils.config"),
                                     cli=PEERS / "openrlhf" / "cli" / "train_ppo_ray.py")
    except ImportError as error:
        return f"OpenRLHF's algorithm modules do not import ({error})"
    finally:
        for name in made:
            sys.modules.pop(name, None)


LOADERS = {"trl": trl, "verl": verl, "openrlhf": openrlhf}
"""Framework -> its loader."""
