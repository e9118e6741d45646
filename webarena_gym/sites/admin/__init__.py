"""The embedded shop's admin panel (stand-in for WebArena's ``shopping_admin``)."""
