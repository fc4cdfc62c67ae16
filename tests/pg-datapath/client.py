#!/usr/bin/env python3
"""A libpq >= 17 client for the data-path tests: one physical replication connection, one command.

Input: a JSON object of libpq connection parameters (keyword -> string), as the first argument or
on standard input, e.g. the parameters of a CNPG `externalClusters` entry:

    {"host": "finance-db-tenant-a.apps.site-paris.example.com", "hostaddr": "127.0.0.1",
     "port": "5433", "user": "streaming_replica", "dbname": "postgres",
     "sslmode": "verify-full", "sslnegotiation": "direct",
     "sslcert": "...", "sslkey": "...", "sslrootcert": "..."}

It adds `replication=true` (a physical replication connection, as a CNPG replica's
pg_basebackup / walreceiver opens), sets `connect_timeout` when missing (so it never hangs), and
runs IDENTIFY_SYSTEM through the simple-query protocol (replication connections refuse the
extended protocol).

Output: one JSON line on stdout, exit code 0 or 1:
    {"ok": true, "systemid": "...", "timeline": 1, "xlogpos": "...", "libpq": 180006}
    {"ok": false, "error": "...", "libpq": 180006}
"""

import json
import sys

DEFAULT_CONNECT_TIMEOUT = "10"


def emit(result, code):
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def read_params():
    raw = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    params = json.loads(raw)
    if not isinstance(params, dict):
        raise ValueError("the input must be a JSON object of libpq connection parameters")
    return {str(k): str(v) for k, v in params.items()}


def main():
    try:
        import psycopg
        from psycopg import pq
        from psycopg.conninfo import make_conninfo
    except ImportError as e:
        emit({"ok": False, "error": f"psycopg is not installed ({e}); run `bash tests/pg-datapath/install.sh`"}, 1)

    libpq = pq.version()
    base = {"libpq": libpq}
    if libpq < 170000:
        emit({**base, "ok": False, "error": f"libpq {libpq} is older than 17: it has no sslnegotiation=direct"}, 1)

    try:
        params = read_params()
    except (ValueError, json.JSONDecodeError) as e:
        emit({**base, "ok": False, "error": f"bad input: {e}"}, 1)

    params.setdefault("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    params["replication"] = "true"

    try:
        conninfo = make_conninfo("", **params)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            res = conn.pgconn.exec_(b"IDENTIFY_SYSTEM")
            if res.status != pq.ExecStatus.TUPLES_OK:
                msg = (res.error_message or b"").decode("utf-8", "replace").strip()
                emit({**base, "ok": False, "error": f"IDENTIFY_SYSTEM failed: {msg or res.status.name}"}, 1)
            if res.ntuples != 1 or res.nfields < 3:
                emit({**base, "ok": False, "error": f"IDENTIFY_SYSTEM returned {res.ntuples} rows of {res.nfields} fields"}, 1)

            def cell(col):
                value = res.get_value(0, col)
                return None if value is None else value.decode()

            timeline = cell(1)
            emit(
                {
                    **base,
                    "ok": True,
                    "systemid": cell(0),
                    "timeline": int(timeline) if timeline is not None else None,
                    "xlogpos": cell(2),
                    "ssl": conn.pgconn.ssl_in_use,
                },
                0,
            )
    except psycopg.Error as e:
        emit({**base, "ok": False, "error": str(e).strip()}, 1)
    except Exception as e:  # noqa: BLE001 - anything else is a failure to report, not a traceback
        emit({**base, "ok": False, "error": f"{type(e).__name__}: {e}"}, 1)


if __name__ == "__main__":
    main()
