package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/nddmilter/nddmilter/internal/imatchbag"
)

// evidenceMessages are signed messages of every kind: the realistic mix,
// a mailing-list post with a footer, an ARF report, a skipped message.
func evidenceMessages(t *testing.T) []*Message {
	t.Helper()
	im, ad, lex := signers(t)
	p, err := New(im, ad, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	raws := messages(t, lex)
	raws = append(raws,
		[]byte("List-Id: <kernel-users.lists.example.org>\r\nSubject: build fails\r\n\r\n"+
			"Has anyone built the kernel module against the new headers? The build fails at the linking step with\n"+
			"undefined references to the scheduler symbols, and the configuration options look right to me.\n"+
			"_______________________________________________\nKernel-users mailing list\nKernel-users@lists.example.org\n"+
			"https://lists.example.org/mailman/listinfo/kernel-users\n"),
		[]byte("Subject: hi\r\n\r\nok\r\n"))
	arf, err := os.ReadFile(filepath.Join("..", "mime", "testdata", "arf.eml"))
	if err != nil {
		t.Fatal(err)
	}
	raws = append(raws, arf)
	var ms []*Message
	for _, raw := range raws {
		m, err := p.SignReport(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// sameEvidence compares what the campaign engine reads of a Message.
func sameEvidence(t *testing.T, i int, got, want *Message, terms bool) {
	t.Helper()
	type view struct {
		ARF                                             bool
		Subject, From, MessageID, Excerpt, SignerReason string
		Warnings                                        []string
		Unique, FooterIMatch, FooterAt                  int
		Skip                                            Skip
		IMatch                                          []imatchbag.Signature
		Keys                                            [][][]byte
		SketchBytes, QSketchBytes                       []byte
		Sketch, QSketch                                 any
		Body                                            Body
		Terms                                           []uint32
	}
	v := func(m *Message) view {
		w := view{
			ARF: m.ARF, Subject: m.Subject, From: m.From, MessageID: m.MessageID, Excerpt: m.Excerpt,
			SignerReason: m.SignerReason, Warnings: m.Warnings, Unique: m.Unique, FooterIMatch: m.FooterIMatch,
			FooterAt: m.FooterAt, Skip: m.Skip, IMatch: m.IMatch,
			Keys:        [][][]byte{m.IMatchKeys, m.ShortKeys, m.ShortLookup, m.BandKeys, m.QKeys, m.Keys()},
			SketchBytes: m.SketchBytes, QSketchBytes: m.QSketchBytes, Sketch: m.Sketch, QSketch: m.QSketch,
			Body: *m.Body(),
		}
		if terms && m.HasSketch() {
			w.Terms = m.TermHashes()
		}
		if len(w.Warnings) == 0 {
			w.Warnings = nil
		}
		return w
	}
	if g, w := v(got), v(want); !reflect.DeepEqual(g, w) {
		t.Errorf("message %d: decoded\n%+v\nwant\n%+v", i, g, w)
	}
}

// A decoded evidence is the Message the engine was given: every key,
// sketch, footer evidence, sample and skip reason (and the term hashes
// when asked for).
func TestEvidenceRoundTrip(t *testing.T) {
	ms := evidenceMessages(t)
	var footer, skipped, arf bool
	for i, m := range ms {
		footer = footer || m.Body().HasFooter
		skipped = skipped || m.Skip != NoSkip
		arf = arf || m.ARF
		for _, terms := range []bool{false, true} {
			b, err := m.MarshalEvidence(EvidenceOptions{Terms: terms})
			if err != nil {
				t.Fatal(err)
			}
			got, err := UnmarshalEvidence(b)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			sameEvidence(t, i, got, m, terms)
			again, err := got.MarshalEvidence(EvidenceOptions{Terms: terms})
			if err != nil || !bytes.Equal(again, b) {
				t.Errorf("message %d: encoding of the decoded message differs (%v)", i, err)
			}
			if !terms && len(got.TermHashes()) != 0 {
				t.Errorf("message %d: term hashes without Terms", i)
			}
		}
	}
	if !footer || !skipped || !arf {
		t.Errorf("the messages lack a case: footer %v, skipped %v, ARF %v", footer, skipped, arf)
	}
}

// goldenMessage is a small Message with every kind of field.
func goldenMessage() *Message {
	sig := imatchbag.Signature{Lexicon: 0x01020304, Bag: 2, Hash: [16]byte{15: 9}}
	return &Message{
		ARF: true, Subject: "Offer", From: "a@example.com", MessageID: "id@x", Excerpt: "Buy now",
		Warnings: []string{"w"}, Unique: 42, SignerReason: "", FooterAt: -1,
		IMatch: []imatchbag.Signature{sig}, IMatchKeys: [][]byte{sig.AppendKey(nil)},
		ShortKeys: [][]byte{{1, 'S', 7}}, ShortLookup: [][]byte{{1, 'S', 8}},
	}
}

// TestEvidenceGolden pins the evidence wire format (EvidenceVersion 1):
// the hosts of a fleet exchange it.
func TestEvidenceGolden(t *testing.T) {
	m := goldenMessage()
	b, err := m.MarshalEvidence(EvidenceOptions{Terms: true})
	if err != nil {
		t.Fatal(err)
	}
	// version, flags (ARF), skip, Unique 42, FooterIMatch 0, FooterAt+1 0,
	// five strings, one warning, the five key lists, two empty sketches
	want := "0101002a0000" + "054f66666572" + "0d61406578616d706c652e636f6d" + "0469644078" +
		"07427579206e6f77" + "00" + "010177" +
		"0117" + "0149010203040200000000000000000000000000000009" +
		"0103015307" + "0103015308" + "00" + "00" + "00" + "00"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("evidence = %s\nwant       %s", got, want)
	}
	// A signed message: the encoding follows the signature families'
	// own golden vectors.
	ms := evidenceMessages(t)
	h := sha256.New()
	for _, m := range ms {
		b, err := m.MarshalEvidence(EvidenceOptions{Terms: true})
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), goldenEvidenceSum; got != want {
		t.Errorf("evidence of the test messages: sha256 %s, want %s", got, want)
	}
}

// goldenEvidenceSum is the SHA-256 of the evidence of evidenceMessages.
const goldenEvidenceSum = "8827b7dbfa7e9b96fced571aeccb1e4e72706ca1b53c132351ab54ad16fc5c40"

func TestUnmarshalEvidenceMalformed(t *testing.T) {
	ms := evidenceMessages(t)
	good, err := ms[0].MarshalEvidence(EvidenceOptions{Terms: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version", append([]byte{9}, good[1:]...)},
		{"flags", append([]byte{good[0], 0x80}, good[2:]...)},
		{"skip", append([]byte{good[0], good[1], 200}, good[3:]...)},
		{"truncated", good[:len(good)/2]},
		{"trailing", append(slices.Clone(good), 0)},
		{"huge count", []byte{EvidenceVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"huge string", []byte{EvidenceVersion, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"bad varint", []byte{EvidenceVersion, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := UnmarshalEvidence(tt.b)
			if !errors.Is(err, ErrEvidence) || m != nil {
				t.Errorf("got %v, %v; want ErrEvidence", m, err)
			}
		})
	}
	// A malformed I-Match key or sketch inside a well-formed layout.
	bad := &Message{FooterAt: -1, IMatchKeys: [][]byte{{1, 2, 3}}}
	b, err := bad.MarshalEvidence(EvidenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalEvidence(b); !errors.Is(err, ErrEvidence) {
		t.Errorf("bad I-Match key: %v", err)
	}
	bad = &Message{FooterAt: -1, SketchBytes: []byte{1, 2, 3}}
	if b, err = bad.MarshalEvidence(EvidenceOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalEvidence(b); !errors.Is(err, ErrEvidence) {
		t.Errorf("bad sketch: %v", err)
	}
}

func FuzzUnmarshalEvidence(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{EvidenceVersion, 0, 0, 0, 0, 0})
	if b, err := goldenMessage().MarshalEvidence(EvidenceOptions{}); err == nil {
		f.Add(b)
	}
	for _, s := range []string{"Subject: x\r\n\r\nbuy cheap watches now from our store today only\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := UnmarshalEvidence(b)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes: one encoding per
		// message.
		again, err := m.MarshalEvidence(EvidenceOptions{Terms: len(m.TermHashes()) > 0})
		if err != nil {
			t.Fatalf("decoded evidence does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, was %x", again, b)
		}
	})
}
