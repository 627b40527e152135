"""The applications behind ``pglab demo`` and ``pglab train-agent``: a run, its measurements and its report."""
