#!/bin/sh
# nddmilter prerm (deb: remove|upgrade|…; rpm: 0 erase, 1 upgrade): when the
# package goes away (not on upgrade), stop the daemon, however it was
# started (the unit, the init script, or by hand), and say what was stopped.
set -e
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl disable --now nddmilter.service >/dev/null 2>&1 || true
elif [ -x /etc/init.d/nddmilter ]; then
	/etc/init.d/nddmilter stop || true
fi
# A daemon started by hand still runs the package's binary: stop it too.
pids=
for p in /proc/[0-9]*; do
	[ "$(readlink "$p/exe" 2>/dev/null)" = /usr/bin/nddmilter ] && pids="$pids ${p#/proc/}"
done
if [ -n "$pids" ]; then
	start-stop-daemon --stop --quiet --oknodo --retry TERM/45/KILL/5 --exec /usr/bin/nddmilter || true
	echo "nddmilter: stopped the running nddmilter processes:$pids"
fi
exit 0
