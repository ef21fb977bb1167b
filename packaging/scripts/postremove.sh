#!/bin/sh
# nddmilter postrm (deb: remove|purge|upgrade|…; rpm: 0 erase, 1 upgrade).
# Purge (deb only) deletes the store /var/lib/nddmilter — the campaigns
# and the API token — and /etc/nddmilter; remove keeps both. The system
# user nddmilter stays (Debian's convention: files elsewhere may still
# belong to it); `userdel nddmilter` removes it.
set -e
case "$1" in
purge)
	rm -rf /var/lib/nddmilter /etc/nddmilter /var/log/nddmilter.log
	if command -v update-rc.d >/dev/null; then
		update-rc.d nddmilter remove >/dev/null 2>&1 || true
	fi
	if command -v dpkg-statoverride >/dev/null && dpkg-statoverride --list /etc/nddmilter/nddmilter.yaml >/dev/null; then
		dpkg-statoverride --remove /etc/nddmilter/nddmilter.yaml || true
	fi
	;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
