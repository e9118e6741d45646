"""``webarena-sites``: run the embedded sites for people to browse.

webarena-sites serve [--port-base 7770] [--seed 0]   # prints the URLs and demo accounts; Ctrl-C stops
webarena-sites build [--seed 0]                      # builds (or finds) the cached pristine databases
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from webarena_gym.sites.lifecycle import EmbeddedSites
from webarena_gym.sites.login import ACCOUNTS
from webarena_gym.sites.seed import DEFAULT_SEED, pristine_paths

ENV_NAMES = {"shopping": "SHOPPING", "shopping_admin": "SHOPPING_ADMIN", "reddit": "REDDIT"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="webarena-sites", description="Embedded stand-ins for WebArena's sites."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the shop, its admin panel and the forum until Ctrl-C")
    serve.add_argument(
        "--port-base",
        type=int,
        default=None,
        help="use ports N (shop), N+1 (admin), N+2 (forum) instead of free ports",
    )
    serve.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the generated world")
    build = commands.add_parser("build", help="build the cached pristine databases and print their paths")
    build.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the generated world")
    return parser


def serve(port_base: int | None, seed: int) -> int:
    """Start the sites, print how to reach them, wait for Ctrl-C (or SIGTERM), stop them."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with EmbeddedSites(seed=seed, port_base=port_base) as sites:
        print("Embedded WebArena sites are running:")
        for key, url in sites.urls.items():
            print(f"  {key:<15} {url}")
        print("\nDemo accounts (every seeded account of a site shares its password):")
        for key, (user, password) in ACCOUNTS.items():
            print(f"  {key:<15} {user} / {password}")
        print("\nFor WebArena task files, export:")
        for key, url in sites.urls.items():
            print(f"  export {ENV_NAMES[key]}={url}")
        print("\nPress Ctrl-C to stop.", flush=True)
        try:
            while not stop.wait(0.5):
                if sites.pid is None:
                    break
        except KeyboardInterrupt:
            pass
    print("Stopped.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``webarena-sites``."""
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return serve(args.port_base, args.seed)
    for name, path in pristine_paths(args.seed).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
