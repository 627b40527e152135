"""pglab conform: a framework's own loss and trainer code, run on pglab's exact batches, against what it documents."""
