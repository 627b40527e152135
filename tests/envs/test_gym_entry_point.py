"""gymnasium.make("pglab/BugFix-v0") without `import pglab`: the gymnasium.envs entry point, and gymnasium 1.x's
module-prefixed id; each in a fresh interpreter that has not imported pglab."""

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

pytestmark = pytest.mark.integration


def fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter and return its stdout (its stderr on failure, in the assertion)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_installed_entry_point_registers_bugfix_as_gymnasium_0_29_loads_plugins():
    found = [ep for ep in entry_points(group="gymnasium.envs") if ep.name == "pglab"]
    assert [ep.value for ep in found] == ["pglab.envs.registration:register_envs"], \
        "the entry point is registered by `pip install -e .` (make's install): reinstall after editing pyproject"
    # gymnasium 0.26-0.29's load_plugin_envs: each entry point in the namespace of its name, loaded and called
    out = fresh("""
        import sys
        from importlib.metadata import entry_points
        import gymnasium
        from gymnasium.envs.registration import namespace

        (plugin,) = [ep for ep in entry_points(group="gymnasium.envs") if ep.name == "pglab"]
        with namespace(plugin.name):
            plugin.load()()
        print("pglab.envs.bugfix" in sys.modules)
        env = gymnasium.make("pglab/BugFix-v0")
        print(env.reset(seed=0)[0].splitlines()[0] != "")
    """)
    assert out.split() == ["False", "True"]          # registering imports nothing of the environment


def test_gymnasium_1_makes_it_from_the_module_prefixed_id_without_an_import_line():
    out = fresh("""
        import sys
        import gymnasium

        assert "pglab" not in sys.modules
        env = gymnasium.make("pglab:pglab/BugFix-v0")
        observation, info = env.reset(seed=0)
        print(type(env.unwrapped).__name__, isinstance(observation, str))
    """)
    assert out.split() == ["BugFixEnv", "True"]
