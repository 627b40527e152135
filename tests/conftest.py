import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from pglab.envs.bugfix import make_tasks  # noqa: E402
from pglab.models import build_tokenizer
from pglab.runtime.threads import single_torch_thread  # noqa: E402
from pglab.trainers.cloning import CloningSettings, make_base_agent


@pytest.fixture(scope="module")
def one_thread():
    """Small tensor work on one torch thread for a whole module (use with pytest.mark.usefixtures)."""
    with single_torch_thread():
        yield


@pytest.fixture(scope="module")
def tok():
    """The word-level tokenizer over every BugFixEnv task."""
    return build_tokenizer(make_tasks("all"))


@pytest.fixture(scope="module")
def cloned_agent(tok):
    """A briefly cloned agent (cached on disk): mostly valid calls, episodes of different lengths."""
    return make_base_agent(tok, settings=CloningSettings(steps=60, episodes_per_task=2))
