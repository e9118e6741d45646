"""The embedded forum (stand-in for WebArena's ``reddit``, a Postmill instance)."""
