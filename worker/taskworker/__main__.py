"""`python -m taskworker reconcile`: run the reconciler against DATA_PLANE_ADDR."""

from __future__ import annotations

import asyncio
import logging
import sys

from .run import run_reconciler


def main(argv: list[str]) -> int:
    if argv != ["reconcile"]:
        print("usage: python -m taskworker reconcile   (env DATA_PLANE_ADDR, RECONCILE_INTERVAL_SECONDS)")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run_reconciler())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
