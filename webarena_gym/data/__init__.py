"""Data files shipped with webarena_gym (the bundled embedded task set under ``tasks/``)."""
