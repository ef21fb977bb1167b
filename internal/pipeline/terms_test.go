package pipeline

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestTermsGolden pins the term-set wire format (TermsVersion 1): FNV-1a
// 32-bit hashes of the distinct terms, sorted, 4 bytes each.
func TestTermsGolden(t *testing.T) {
	hs := termHashes([]string{"offer", "money", "offer", "free"})
	if got, want := hex.EncodeToString(EncodeTerms(hs)), "010399b3eedbc1d9c9dde150c94f"; got != want {
		t.Errorf("EncodeTerms = %s, want %s", got, want)
	}
	back, err := DecodeTerms(EncodeTerms(hs))
	if err != nil || !slices.Equal(back, hs) {
		t.Errorf("round trip %v, %v; want %v", back, err, hs)
	}
}

func TestTermsBounded(t *testing.T) {
	var terms []string
	for i := range 3 * MaxTerms {
		terms = append(terms, fmt.Sprint("term", i))
	}
	hs := termHashes(terms)
	if len(hs) != MaxTerms || !slices.IsSorted(hs) {
		t.Fatalf("%d hashes", len(hs))
	}
	all := termHashes(terms[:MaxTerms])
	// the sample is the smallest hashes of all terms
	if hs[0] > all[0] {
		t.Errorf("bottom-k sample does not start with the smallest hash")
	}
	if EncodeTerms(nil) != nil || termHashes(nil) != nil {
		t.Error("empty term set encodes")
	}
}

func TestDecodeTermsMalformed(t *testing.T) {
	good := EncodeTerms([]uint32{1, 2, 3})
	for i := range len(good) {
		if _, err := DecodeTerms(good[:i]); !errors.Is(err, ErrBadTerms) {
			t.Errorf("truncated to %d bytes: %v", i, err)
		}
	}
	bad := [][]byte{
		{2, 1, 0, 0, 0, 1},                // version
		{1, 2, 0, 0, 0, 2, 0, 0, 0, 1},    // not sorted
		{1, 1, 0, 0, 0, 1, 9},             // trailing byte
		{1, 0xff, 0xff, 0xff, 0xff, 0x0f}, // huge count
	}
	for _, b := range bad {
		if _, err := DecodeTerms(b); !errors.Is(err, ErrBadTerms) {
			t.Errorf("DecodeTerms(%x) = %v", b, err)
		}
	}
}

func TestMessageTerms(t *testing.T) {
	im, ad, _ := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var m *Message
	m, err = p.Sign(context.Background(), []byte("Subject: cheap watches\r\n\r\nBuy cheap replica watches today, cheap prices.\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := termHashes([]string{"cheap", "prices", "replica", "today", "watches"}); !slices.Equal(m.TermHashes(), want) {
		t.Errorf("terms %v, want %v", m.TermHashes(), want)
	}
}

func FuzzDecodeTerms(f *testing.F) {
	f.Add(EncodeTerms([]uint32{1, 2, 3}))
	f.Add([]byte{1, 0})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := DecodeTerms(b)
		if err != nil {
			return
		}
		if !slices.IsSorted(hs) || len(hs) > MaxTerms {
			t.Fatalf("decoded %v", hs)
		}
		if back := EncodeTerms(hs); len(hs) > 0 && !slices.Equal(back, b) {
			t.Fatalf("re-encoded %x, want %x", back, b)
		}
	})
}
