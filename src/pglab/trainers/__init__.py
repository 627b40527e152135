"""Trainers: every training loop of the lab, as functions with explicit arguments (no experiment Config).

step (the guarded optimizer step), bandit, tabular, tokenworld, and the agent and LM trainers.
"""
