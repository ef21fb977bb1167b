package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
)

// TermsVersion is the version of the term-set wire format (EncodeTerms):
// a campaign keeps the term sets of a few reported messages to verify
// similarity matches exactly (internal/ppjoin).
const TermsVersion = 1

// MaxTerms bounds a term set: of a message with more distinct terms, the
// MaxTerms smallest hashes are kept (a bottom-k sample, the same for
// every message, so two long copies keep comparable samples).
const MaxTerms = 1024

// ErrBadTerms is returned by DecodeTerms for a malformed term set.
var ErrBadTerms = errors.New("malformed term set")

// termHashes are the 32-bit FNV-1a hashes of the distinct terms, sorted
// ascending, without repeats, at most MaxTerms of them.
func termHashes(terms []string) []uint32 {
	if len(terms) == 0 {
		return nil
	}
	hs := make([]uint32, 0, len(terms))
	h := fnv.New32a()
	for _, t := range terms {
		h.Reset()
		h.Write([]byte(t))
		hs = append(hs, h.Sum32())
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	if len(hs) > MaxTerms {
		hs = hs[:MaxTerms:MaxTerms]
	}
	return hs
}

// EncodeTerms renders a term set (sorted hashes) as stored: the version
// byte, the count (uvarint) and each hash in 4 bytes, big-endian.
func EncodeTerms(hs []uint32) []byte {
	if len(hs) == 0 {
		return nil
	}
	b := make([]byte, 0, 1+binary.MaxVarintLen32+4*len(hs))
	b = append(b, TermsVersion)
	b = binary.AppendUvarint(b, uint64(len(hs)))
	for _, h := range hs {
		b = binary.BigEndian.AppendUint32(b, h)
	}
	return b
}

// DecodeTerms reads a term set written by EncodeTerms. It never panics;
// a set of another version, truncated, too long, not sorted or not in
// EncodeTerms' own form is an error wrapping ErrBadTerms.
func DecodeTerms(b []byte) ([]uint32, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadTerms, len(b))
	}
	if b[0] != TermsVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadTerms, b[0])
	}
	n, k := binary.Uvarint(b[1:])
	// one encoding per set: the count in its shortest form
	if k <= 0 || k != len(binary.AppendUvarint(nil, n)) || n > MaxTerms || uint64(len(b)-1-k) != 4*n {
		return nil, fmt.Errorf("%w: bad count", ErrBadTerms)
	}
	b = b[1+k:]
	hs := make([]uint32, n)
	for i := range hs {
		hs[i] = binary.BigEndian.Uint32(b[4*i:])
		if i > 0 && hs[i] <= hs[i-1] {
			return nil, fmt.Errorf("%w: not sorted", ErrBadTerms)
		}
	}
	return hs, nil
}

// TermSetOf returns the term set of distinct terms (in any order): the
// hashes a message with those terms has (Message.TermHashes).
func TermSetOf(terms []string) []uint32 { return termHashes(terms) }
