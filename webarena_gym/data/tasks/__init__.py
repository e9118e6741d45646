"""The bundled embedded task set: ``embedded_<split>.json``, made by ``python -m webarena_gym.taskgen``."""
