"""Trainers: REINFORCE for token-sequence agents, and for Hugging Face causal LMs."""
