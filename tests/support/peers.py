"""The peers' own loss code, imported for the tests that compare pglab against it: ``pglab.conform.frameworks``
(which ``pglab conform`` uses too) installs nothing and imports each framework's algorithm modules, or says why not."""

from pglab.conform.frameworks import PEERS, openrlhf, peer_path, trl, verl

__all__ = ["PEERS", "openrlhf", "peer_path", "trl", "verl"]
