"""The embedded shop storefront (stand-in for WebArena's ``shopping``) and its shared queries."""
