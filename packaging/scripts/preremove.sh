#!/bin/sh
# nddmilter prerm (deb: remove|upgrade|…; rpm: 0 erase, 1 upgrade): stop
# and disable the unit when the package goes away (not on upgrade).
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now nddmilter.service >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
