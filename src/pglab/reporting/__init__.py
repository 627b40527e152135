"""What a run tells its reader: the Result of an experiment, its written report, and figures."""
