"""BugFixEnv: a code-repair gym. An agent fixes a buggy Python function through text tool calls.

Importing this package registers the gymnasium id ``pglab/BugFix-v0``.
"""

from pglab.envs.bugfix.env import BUDGET, CALLS, BugFixEnv, EpisodeRecord, parse_call, protocol, record_stats
from pglab.envs.bugfix.grader import Grade, Grader, default_grader
from pglab.envs.bugfix.ops import OP_NAMES, apply_op
from pglab.envs.bugfix.sandbox import OUTCOMES, Job, Limits, ProgramResult, Sandbox, TestResult, same
from pglab.envs.bugfix.scripted import (
    Episode,
    ScriptedPolicy,
    exact_pass_rate,
    rollout_stats,
    scripted_policy,
    scripted_rollout,
)
from pglab.envs.bugfix.tasks import FAMILIES, FIX_OPS, Case, Task, get_task, make_tasks
from pglab.envs.registration import BUGFIX_ID as ENV_ID
from pglab.envs.registration import register_envs

register_envs()

__all__ = [
    "BUDGET", "CALLS", "ENV_ID", "FAMILIES", "FIX_OPS", "OP_NAMES", "BugFixEnv", "Case", "Episode", "EpisodeRecord",
    "Grade", "Grader", "Job", "Limits", "ProgramResult", "Sandbox", "ScriptedPolicy", "Task", "TestResult", "apply_op",
    "OUTCOMES", "default_grader", "exact_pass_rate", "get_task", "make_tasks", "parse_call",
    "protocol", "record_stats", "rollout_stats", "same", "scripted_policy", "scripted_rollout",
]
