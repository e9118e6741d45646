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


def _first_interrupt(signum: int, frame: object) -> None:
    """SIGINT handler: the first Ctrl-C stops the sites; later ones only say that stopping is under way."""
    signal.signal(signal.SIGINT, _already_stopping)
    raise KeyboardInterrupt


def _already_stopping(signum: int, frame: object) -> None:
    print("Stopping the sites, please wait...", file=sys.stderr, flush=True)


def _print_urls(sites: EmbeddedSites) -> None:
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


def serve(port_base: int | None, seed: int) -> int:
    """Start the sites, print how to reach them, wait for Ctrl-C (or SIGTERM), stop them. A Ctrl-C while
    they stop does not interrupt the stopping (no traceback, no half-closed server)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, _first_interrupt)
    sites = EmbeddedSites(seed=seed, port_base=port_base)
    try:
        sites.start()
        _print_urls(sites)
        while not stop.wait(0.5) and sites.pid is not None:
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, _already_stopping)
        sites.close()
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
