#!/usr/bin/python3
"""pyzor_batch.py — run Pyzor's own digest and client code over many files.

The `pyzor` command digests one message per process (or an mbox, whose
answers cannot be matched to files when a message has no digest). This
calls the same library functions as `pyzor check` / `pyzor report` for each
file of a list, in one process, and prints one line per file:

    PATH<TAB>COUNT      (check: the server's report count; 0 = unknown)
    PATH<TAB>ok         (report)
    PATH<TAB>error:...  (either)

Usage: pyzor_batch.py check|report HOST:PORT LISTFILE
"""
import email
import sys

import pyzor.client
import pyzor.digest


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "report"):
        sys.stderr.write(__doc__)
        return 2
    mode, server, listfile = sys.argv[1:]
    host, port = server.rsplit(":", 1)
    addr = (host, int(port))
    client = pyzor.client.Client(timeout=10)
    out = sys.stdout
    with open(listfile, encoding="utf-8") as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    for path in paths:
        try:
            with open(path, "rb") as m:
                msg = email.message_from_bytes(m.read())
            digest = pyzor.digest.DataDigester(msg).value
            if mode == "check":
                resp = client.check(digest, addr)
                out.write("%s\t%d\n" % (path, int(resp["Count"])))
            else:
                resp = client.report(digest, addr)
                code = resp.get_code() if hasattr(resp, "get_code") else 200
                out.write("%s\t%s\n" % (path, "ok" if int(code) == 200 else "error:%s" % code))
        except Exception as e:  # one bad message must not end the batch
            out.write("%s\terror:%s\n" % (path, str(e).replace("\t", " ").replace("\n", " ")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
