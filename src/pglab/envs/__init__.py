"""Environments. Those with an exact answer (value, gradient, variance) expose it beside the sampler.

``envs`` never imports agents or trainers.
"""
