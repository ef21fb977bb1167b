#!/bin/sh
# nddmilter postinst (deb: configure [OLD-VERSION]; rpm: 1 install, 2 upgrade).
#  - the store directory /var/lib/nddmilter (store.dir of the packaged
#    configuration), owned by nddmilter, mode 0700;
#  - the configuration readable by the service: 0640 root:nddmilter,
#    unless the administrator set other modes with dpkg-statoverride;
#  - systemd: on a Debian first install the unit is enabled and started
#    (Debian's convention; Postfix is not touched until main.cf names the
#    milter); on upgrade a running unit is restarted; RPM: enabled per
#    the system's preset, not started;
#  - no systemd: /etc/init.d/nddmilter registered for the next boot, not
#    started; the script says so.
set -e
CONF=/etc/nddmilter/nddmilter.yaml
case "$1" in
configure | 1 | 2) ;;
*) exit 0 ;;
esac

# The user normally exists (preinst); a deb configure after an aborted
# install may come without it.
if ! getent passwd nddmilter >/dev/null; then
	getent group nddmilter >/dev/null || groupadd --system nddmilter
	useradd --system --gid nddmilter --home-dir /var/lib/nddmilter --no-create-home \
		--shell /usr/sbin/nologin --comment "nddmilter spam campaign milter" nddmilter
fi
if [ ! -d /var/lib/nddmilter ]; then
	install -d -o nddmilter -g nddmilter -m 0700 /var/lib/nddmilter
fi
if [ -f "$CONF" ] && ! { command -v dpkg-statoverride >/dev/null && dpkg-statoverride --list "$CONF" >/dev/null; }; then
	chown root:nddmilter "$CONF"
	chmod 0640 "$CONF"
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
	case "$1" in
	configure)
		if [ -z "$2" ]; then
			systemctl enable nddmilter.service >/dev/null || true
			if systemctl start nddmilter.service; then
				echo "nddmilter: started nddmilter.service (systemctl status nddmilter)"
			else
				echo "nddmilter: nddmilter.service did not start: see journalctl -u nddmilter" >&2
			fi
		else
			systemctl try-restart nddmilter.service || true
		fi
		;;
	1) systemctl preset nddmilter.service >/dev/null 2>&1 || true ;;
	2) systemctl try-restart nddmilter.service || true ;;
	esac
else
	# No systemd: the init script is registered for the next boot, and
	# nothing is started now (say so: nothing filters until it runs).
	if [ -x /etc/init.d/nddmilter ] && command -v update-rc.d >/dev/null; then
		update-rc.d nddmilter defaults >/dev/null 2>&1 || true
	fi
	if [ -x /etc/init.d/nddmilter ] && /etc/init.d/nddmilter status >/dev/null 2>&1; then
		echo "nddmilter: systemd is not running; the daemon started by /etc/init.d/nddmilter keeps running: restart it to use this version (/etc/init.d/nddmilter restart)"
	else
		echo "nddmilter: systemd is not running, so the daemon was NOT started."
		echo "nddmilter: start it with: /etc/init.d/nddmilter start   (log: /var/log/nddmilter.log)"
	fi
fi
exit 0
