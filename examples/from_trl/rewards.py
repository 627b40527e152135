"""A reward function in TRL's form, used unchanged by both scripts of this folder."""


def count_letter(prompts, completions, letter, **kwargs):
    """How often each completion uses its row's ``letter`` (a column of the dataset)."""
    return [float(c.count(x)) for c, x in zip(completions, letter)]
