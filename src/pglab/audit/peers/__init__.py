"""The configurations users run in TRL, verl and OpenRLHF, each written with pglab's estimators.

One module per framework (``trl``, ``verl``, ``openrlhf``) and what they share (``common``);
``pglab.audit.presets`` names them. tests/audit/test_presets_peers.py runs each against the framework's own code.
"""
