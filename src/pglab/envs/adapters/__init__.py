"""Other projects' environment contracts presented as pglab's text-turn environment (:mod:`pglab.envs.text`).

``trl``: a class written for TRL GRPOTrainer's ``environment_factory``; ``reasoning_gym``: reasoning-gym's
procedural tasks, scored by their own ``score_answer``. ``--env trl:module:factory`` and
``--env reasoning-gym:TASK`` reach them through :func:`pglab.envs.text.env_factory`.
"""
