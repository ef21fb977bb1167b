package campaign

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/nddmilter/nddmilter/internal/pipeline"
)

// reportDigest identifies a reported message for the store's
// once-per-message rule (store.ReportInput.Digest): the first 16 bytes of
// the SHA-256 of its Message-ID and its evidence — I-Match keys,
// short-message keys and ANDD sketch. Both survive what an IMAP server or
// a mail client does when it copies or re-uploads a message (COPY,
// APPEND: added headers, another transfer encoding), while two deliveries
// of one spam differ by their Message-ID. A new lexicon or model gives
// new digests: a message reported again after such a change counts again.
func reportDigest(m *pipeline.Message) []byte {
	h := sha256.New()
	put := func(b []byte) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	put([]byte(m.MessageID))
	for _, group := range [][][]byte{m.IMatchKeys, m.ShortKeys, {m.SketchBytes}} {
		put(binary.AppendUvarint(nil, uint64(len(group))))
		for _, k := range group {
			put(k)
		}
	}
	return h.Sum(nil)[:16]
}
