"""Token-sequence agents: tokenizer, TinyAgent, rollouts, behaviour cloning."""
