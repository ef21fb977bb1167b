#!/usr/bin/env bash
# Build the nddmilter packages (.deb, and .rpm with the same tool),
# reproducibly: the same commit gives the same bytes.
#
#   scripts/build-package.sh                  # dist/nddmilter_VERSION-1_amd64.deb and .rpm
#   GOARCH=arm64 scripts/build-package.sh     # dist/nddmilter_VERSION-1_arm64.deb and .aarch64.rpm
#   OUT=/tmp/pkgs PACKAGERS=deb scripts/build-package.sh
#
# What goes in (packaging/nfpm.yaml): /usr/bin/nddmilter and
# /usr/bin/nddmilter-pipe, the product's two programs (CGO off, so any
# GOARCH cross-builds from this machine; -trimpath; version and commit
# from git in internal/buildinfo via -ldflags; the lab, cmd/nddlab, is
# not packaged), /etc/nddmilter/nddmilter.yaml
# (a conffile: config/nddmilter.yaml with store.dir /var/lib/nddmilter),
# the systemd unit contrib/systemd/nddmilter.service, man pages made from
# the commands' help (`nddmilter gendocs`, a command only a build with the
# tag gendocs has, so that the shipped binary does not link the man-page
# generator), bash/zsh/fish completions
# (`nddmilter completion`), and the docs and MTA snippets in
# /usr/share/doc/nddmilter. The maintainer scripts (packaging/scripts)
# create the system user nddmilter and its store /var/lib/nddmilter.
#
# Reproducible: SOURCE_DATE_EPOCH is the last commit's time (unless set),
# and dates the man pages, every file in the archives and the archives;
# gzip -n; the packager is a pinned nFPM built from the Go module proxy.
# Environment: GOARCH (default: this machine's), OUT (default dist),
# PACKAGERS (default "deb rpm"). Prints the paths of the packages.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH=$PATH:/usr/local/go/bin
NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.44.2 # later ones need modules the proxy does not serve here
BI=github.com/nddmilter/nddmilter/internal/buildinfo
OUT=${OUT:-dist}
PACKAGERS=${PACKAGERS:-deb rpm}
# The target's architecture; go commands other than the target's build
# (nFPM, the host binary for the docs) run for this machine.
ARCH=${GOARCH:-$(go env GOARCH)}
unset GOARCH

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
COMMIT=$(git rev-parse HEAD)
DESCRIBE=$(git describe --tags --always --dirty)
# Package version: a tag v1.2.3 gives 1.2.3, 4 commits past it
# 1.2.3+4.gHASH; with no tag, 0.0.0+gitDATE.HASH. Dirty trees get .dirty.
if [[ $DESCRIBE =~ ^v?[0-9]+\.[0-9] ]]; then
	PKG_VERSION=$(echo "${DESCRIBE#v}" | sed -E 's/-([0-9]+)-g([0-9a-f]+)/+\1.g\2/; s/-dirty$/.dirty/')
else # a bare hash (no tag yet), which may start with a digit
	PKG_VERSION="0.0.0+git$(TZ=UTC date -d "@$SOURCE_DATE_EPOCH" +%Y%m%d).$(echo "$DESCRIBE" | sed 's/-dirty$/.dirty/')"
fi

STAGE=$(mktemp -d /tmp/nddmilter-pkg.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/man" "$STAGE/completions" "$STAGE/doc" "$OUT"

LDFLAGS="-X $BI.Version=$DESCRIBE -X $BI.Commit=$COMMIT"
CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH go build -trimpath -ldflags "$LDFLAGS" -o "$STAGE/nddmilter" ./cmd/nddmilter
CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH go build -trimpath -ldflags "$LDFLAGS" -o "$STAGE/nddmilter-pipe" ./cmd/nddmilter-pipe
# Man pages and completions come from a build for this machine (the
# target's binary may not run here), with the gendocs command; the help
# text is the same.
CGO_ENABLED=0 go build -tags gendocs -trimpath -ldflags "$LDFLAGS" -o "$STAGE/nddmilter-host" ./cmd/nddmilter
"$STAGE/nddmilter-host" gendocs "$STAGE/man"
cp packaging/man/*.1 "$STAGE/man/" # nddmilter-pipe (standard library flags, no cobra)
gzip -n -9 "$STAGE"/man/*.1
"$STAGE/nddmilter-host" completion bash >"$STAGE/completions/nddmilter.bash"
"$STAGE/nddmilter-host" completion zsh >"$STAGE/completions/_nddmilter"
"$STAGE/nddmilter-host" completion fish >"$STAGE/completions/nddmilter.fish"

# The packaged configuration: the documented one with the store in
# /var/lib/nddmilter (the unit's StateDirectory), so that the daemon and
# every `nddmilter --config /etc/nddmilter/nddmilter.yaml …` share it.
n=$(grep -c '^  dir: nddmilter-data$' config/nddmilter.yaml || true)
[ "$n" = 1 ] || { echo "build-package: config/nddmilter.yaml: expected one '  dir: nddmilter-data' line, found $n" >&2; exit 1; }
sed 's#^  dir: nddmilter-data$#  dir: /var/lib/nddmilter#' config/nddmilter.yaml >"$STAGE/nddmilter.yaml"
cp contrib/systemd/nddmilter.service "$STAGE/nddmilter.service"
cp contrib/sysvinit/nddmilter "$STAGE/nddmilter.init"

cp README.md DEVELOPERS.md docs/*.md "$STAGE/doc/"
mkdir -p "$STAGE/doc/design" && cp docs/design/*.md "$STAGE/doc/design/"
cp contrib/postfix/README.md "$STAGE/doc/POSTFIX.md"
cp contrib/postfix/main.cf.snippet contrib/sendmail/nddmilter.mc "$STAGE/doc/"
# The Dovecot recipe (Junk moves as reports): its guide beside POSTFIX.md,
# its files staged apart (nFPM flattens a directory's tree into its
# destination) for /usr/share/doc/nddmilter/dovecot/.
cp contrib/dovecot/README.md "$STAGE/doc/DOVECOT.md"
mkdir -p "$STAGE/dovecot" && find contrib/dovecot -maxdepth 1 -type f ! -name README.md -exec cp {} "$STAGE/dovecot/" \;
# The Grafana dashboard and the Prometheus alerting rules (with their
# unit tests), for /usr/share/doc/nddmilter/monitoring/.
mkdir -p "$STAGE/monitoring" && cp contrib/grafana/nddmilter.json contrib/prometheus/nddmilter-alerts.yml \
	contrib/prometheus/nddmilter-alerts_test.yml "$STAGE/monitoring/"
cp config/nddmilter.yaml "$STAGE/doc/nddmilter.yaml.example"
cp packaging/copyright "$STAGE/doc/copyright"
cp LICENSE "$STAGE/doc/LICENSE"
find "$STAGE" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

sed -e "s#\${NDD_GOARCH}#$ARCH#g" -e "s#\${NDD_PKG_VERSION}#$PKG_VERSION#g" -e "s#\${NDD_STAGE}#$STAGE#g" \
	packaging/nfpm.yaml >"$STAGE/nfpm.yaml"
for p in $PACKAGERS; do
	go run "$NFPM" package --config "$STAGE/nfpm.yaml" --packager "$p" --target "$OUT/" >"$STAGE/nfpm-$p.log" 2>&1 ||
		{ cat "$STAGE/nfpm-$p.log" >&2; exit 1; }
	sed -n 's/.*created package: *//p' "$STAGE/nfpm-$p.log"
done
