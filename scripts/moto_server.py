#!/usr/bin/env python3
"""Serves moto's S3 (and the rest of moto) SINGLE-THREADED; started by scripts/moto.sh.

`moto_server` (moto.server.main) runs werkzeug with threaded=True, and moto checks the
If-None-Match / If-Match preconditions of PutObject without a lock, so two concurrent
create-if-absent requests can both win. Served from one thread, requests are handled one after
another and conditional writes are atomic, like on real S3. The server speaks HTTP/1.0 in this
mode (werkzeug only enables keep-alive for threaded servers), so an idle client connection never
blocks the others.
"""

import argparse
import os
import signal
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5055)
    args = parser.parse_args()

    # moto uses MOTO_PORT to build some URLs it returns.
    os.environ.setdefault("MOTO_PORT", str(args.port))

    from werkzeug.serving import run_simple
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        create_backend_app,
    )

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))

    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        args.host,
        args.port,
        app,
        threaded=False,
        processes=1,
        use_reloader=False,
        use_debugger=False,
    )


if __name__ == "__main__":
    main()
