#!/bin/sh
# nddmilter preinst (deb: install|upgrade; rpm: 1|2): the system user and
# group nddmilter, so that the files can be given to them.
set -e
if ! getent group nddmilter >/dev/null; then
	groupadd --system nddmilter
fi
if ! getent passwd nddmilter >/dev/null; then
	useradd --system --gid nddmilter --home-dir /var/lib/nddmilter --no-create-home \
		--shell /usr/sbin/nologin --comment "nddmilter spam campaign milter" nddmilter
fi
exit 0
