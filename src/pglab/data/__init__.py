"""Corpora and prompts: the synthetic movie reviews behind the LM trainer's embedded default."""
