"""How work runs on this machine: progress bars, torch threads, process groups, and settings as options."""
