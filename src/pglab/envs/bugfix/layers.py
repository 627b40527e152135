"""The sandbox's isolation layers: what each needs, what it applies on this machine, how its worker starts.

``bwrap`` (a bubblewrap mount, network, IPC and PID namespace), ``landlock`` (a Landlock ruleset) and
``process`` (a plain child process); ``auto`` is the strongest that works here. :func:`describe` says which
mechanism gives which guarantee, and the one warning line says when the layer in effect is weaker than asked.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from pglab.envs.bugfix._worker_os import (
    group_kinds,
    landlock_abi,
    make_worker_group,
    remove_group,
)

WORKER_PARTS = ("_worker_os.py", "_worker_test.py", "_worker_program.py", "_worker.py")
"""The worker program's files, in the order they run as one source (see :mod:`pglab.envs.bugfix._worker`)."""
WORKER_SOURCE = "\n".join(Path(__file__).with_name(part).read_text() for part in WORKER_PARTS)


LAYERS = ("bwrap", "landlock", "process")


ISOLATIONS = ("auto", *LAYERS)


ENV_ALLOWLIST = ("PATH", "LANG")
"""The caller's variables a worker keeps; everything else of the caller's environment stays out."""
HASH_SEED = "0"
"""Every worker's PYTHONHASHSEED: one fixed seed, so that a program's answers cannot hang on a per-worker random seed
(a coin that would differ from one grader to the next)."""


def worker_env() -> dict[str, str]:
    """The whole environment of a worker: PATH and LANG from the caller, the fixed hash seed."""
    return {**{name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}, "PYTHONHASHSEED": HASH_SEED}


@cache
def launcher() -> list[str]:
    """``setarch ARCH -R`` where util-linux has it: workers without address-space randomisation, so that a program
    cannot read a per-worker coin from where its objects lie (``id``); empty where setarch is missing."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return []
    probe = subprocess.run([setarch, platform.machine(), "-R", "true"], capture_output=True, timeout=30)
    return [setarch, platform.machine(), "-R"] if probe.returncode == 0 else []


CGROUP_MOUNT = "/run/pglab-cgroup"


SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")


PACKAGE = Path(__file__).resolve().parents[2]


@cache
def _python() -> str:
    return os.path.realpath(sys.executable)


@cache
def _read_paths() -> tuple[str, ...]:
    """What candidate processes may read under landlock and bwrap: system libraries and the Python installation."""
    return (*SYSTEM_READ, os.path.realpath(sys.base_prefix), os.path.dirname(_python()))


def _bwrap_argv(bwrap: str, config: str, source: str = WORKER_SOURCE, binds: dict[str, str] | None = None) -> list[str]:
    # As root no user namespace, which would leave uid 0 its capabilities inside; programs drop them instead.
    unshare = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    argv = [bwrap, *(unshare if os.geteuid() == 0 else ["--unshare-all"]), "--die-with-parent", "--new-session",
            "--clearenv"]
    for name, value in worker_env().items():
        argv += ["--setenv", name, value]
    for path in dict.fromkeys(_read_paths()):
        argv += ["--ro-bind-try", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for kind, path in (binds or {}).items():
        argv += ["--bind", path, f"{CGROUP_MOUNT}/{kind}"]
    return [*launcher(), *argv, "--chdir", "/tmp", _python(), "-I", "-S", "-c", source, config]


@cache
def layer_problem(layer: str) -> str | None:
    """Why ``layer`` cannot run on this machine (None when it can)."""
    if layer == "landlock" and landlock_abi() < 1:
        return "the kernel has no Landlock (ABI 0); it needs Linux >= 5.13 with landlock in the LSM list"
    if layer == "bwrap":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            return "bubblewrap is not installed (apt-get install bubblewrap)"
        try:
            probe = subprocess.run(_bwrap_argv(bwrap, "", "print('ok')"), env={}, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"bwrap did not start: {err}"
        if probe.stdout != b"ok\n":
            return f"bwrap cannot create its namespaces here: {probe.stderr.decode(errors='replace').strip()}"
    return None


@cache
def _probe(layer: str) -> dict[str, bool]:
    """What the worker may do for its programs in ``layer``: namespaces, the seccomp filter, a fresh keyring."""
    config = json.dumps({"probe": True})
    argv = [_python(), "-I", "-S", "-c", WORKER_SOURCE, config]
    if layer == "bwrap":
        argv = _bwrap_argv(shutil.which("bwrap"), config)
    try:
        out = subprocess.run(argv, env={}, capture_output=True, timeout=30).stdout
        found = json.loads(out)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        found = {}
    return {key: found.get(key) is True for key in ("namespaces", "seccomp", "keyring")}


@cache
def _cgroup_kinds() -> dict[str, str | None]:
    """What cgroups count and kill for programs on this machine (a probe group, made and removed)."""
    dirs = make_worker_group(f"pglab-{os.getpid()}-probe")
    try:
        return group_kinds(dirs)
    finally:
        remove_group(dirs)


def resolve_isolation(isolation: str) -> str:
    """The layer ``isolation`` names; ``auto`` is the strongest that works here. ValueError if unavailable."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"unknown isolation {isolation!r}; pass one of {', '.join(ISOLATIONS)}")
    if isolation == "auto":
        return next(layer for layer in LAYERS if layer_problem(layer) is None)
    problem = layer_problem(isolation)
    if problem:
        raise ValueError(f"isolation={isolation!r} is not available: {problem}; or pass isolation='auto'")
    return isolation


INHERENT: dict[str, list[str]] = {}
"""What a layer never applies, by design: not a reason to warn (since round three every layer confines as far as the
machine allows)."""


def describe(layer: str) -> dict[str, Any]:
    """What ``layer`` applies on this machine: the layer, the kernel's Landlock ABI, which mechanism provides each
    guarantee (``guarantees``), and what it leaves out (``not_applied``)."""
    abi, probe, kinds, root = landlock_abi(), _probe(layer), _cgroup_kinds(), os.geteuid() == 0
    namespaces = probe["namespaces"]
    missing = []
    if abi < 1:
        missing.append("Landlock (the kernel has none): no filesystem rule beyond "
                       + ("the minimal root" if namespaces else "file permissions"))
    missing += ["TCP rules (Landlock ABI < 4)"] * (0 < abi < 4) + ["signal and abstract-socket scoping (Landlock "
                                                                    "ABI < 6)"] * (0 < abi < 6) * (not namespaces)
    if not namespaces:
        missing.append("PID, mount, IPC and network namespaces per program (needs root): processes are killed by tree, "
                       "the base folder is measured and emptied, test processes share it")
    if not kinds["memory"]:
        missing.append("a cgroup memory cap (memory is sampled every 10 ms; memfd_create is refused)")
    if not kinds["pids"]:
        missing.append("a cgroup process cap (processes are sampled every 10 ms)")
    if not probe["seccomp"]:
        missing.append("the seccomp filter (mounts, namespaces, ptrace, bpf, modules, keyrings, devices, sockets)")
    if not namespaces and any(PACKAGE.is_relative_to(p) for p in _read_paths()):
        missing.append(f"hiding the package source ({PACKAGE} is inside a readable system folder)")
    filesystem = [name for name, on in (("bwrap mount namespace", layer == "bwrap"),
                                        ("minimal read-only root per program", namespaces),
                                        (f"Landlock ABI {abi}", abi > 0)) if on]
    network = [name for name, on in (("bwrap network namespace", layer == "bwrap"),
                                     ("an empty network namespace per worker", namespaces),
                                     ("seccomp: AF_UNIX sockets only", probe["seccomp"]),
                                     ("Landlock TCP rules", abi >= 4)) if on]
    guarantees = {
        "identity": "an unprivileged random uid and gid per program, no capabilities" if root else "the caller's uid",
        "cpu time": kinds["cpu"] or "sampled from /proc every 10 ms",
        "memory": kinds["memory"] or "sampled resident memory, memfd_create refused",
        "processes": kinds["pids"] or "sampled process tree",
        "kill": kinds["kill"] or ("PID namespace" if namespaces else "process tree, every 10 ms"),
        "files": "size-capped tmpfs, emptied before each test process" if namespaces else
        "sampled folder size, base folder emptied",
        "ipc": "IPC namespace per program, SysV objects refused" if namespaces else "SysV objects refused",
        "keyrings": "seccomp filter and a fresh session keyring" if probe["seccomp"] else (
            "a fresh session keyring" if probe["keyring"] else None),
        "devices": "null, zero, random, urandom only" if namespaces else None,
        "memory of earlier programs": "programs forked by a zygote that never received a request",
        "filesystem": ", ".join(filesystem) or None,
        "network": ", ".join(network) or None,
    }
    return {"isolation": layer, "landlock_abi": abi, "root": root, "guarantees": guarantees, "not_applied": missing}


_WARNED: set[str] = set()


LOG = logging.getLogger("pglab.sandbox")


def _warn_once(message: str) -> None:
    """One line on stderr, once per process and message."""
    if message not in _WARNED:
        _WARNED.add(message)
        LOG.warning(message)


def _warn_if_weaker(requested: str, layer: str) -> None:
    """Warn when the isolation in effect is weaker than requested, or than ``auto`` would give here."""
    best = resolve_isolation("auto")
    if LAYERS.index(layer) > LAYERS.index(best):
        _warn_once(f"pglab sandbox: isolation={layer!r} is weaker than {best!r}, which this machine offers "
                   f"(pass isolation='auto')")
    lacking = [m for m in describe(layer)["not_applied"] if m not in INHERENT.get(layer, [])]
    if lacking:
        _warn_once(f"pglab sandbox: isolation={requested!r} runs {layer!r} without " + "; ".join(lacking))


__all__ = ["CGROUP_MOUNT", "ENV_ALLOWLIST", "HASH_SEED", "INHERENT", "ISOLATIONS", "LAYERS", "LOG", "PACKAGE",
           "SYSTEM_READ", "WORKER_SOURCE", "describe", "launcher", "layer_problem", "resolve_isolation", "worker_env"]
