"""The project templates of ``multiverse init`` (:mod:`multiverse.cli`): each folder holds
the files of one template, written into the new project as they are, after the shared
Snakefile. ``function``: your training as a Python function; ``command``: your training
as a script with command-line arguments; ``builtin``: the built-in trainer on digits."""
