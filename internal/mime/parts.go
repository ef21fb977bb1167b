package mime

import (
	"bytes"
	"crypto/sha256"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
)

// Part is a MIME part whose content is not read as text: an image, an
// attachment of any type (text attachments included), audio, video or any
// other non-text leaf part, or an image inlined in HTML as a data: URI of
// a src attribute. Its decoded bytes are not kept, only what
// identifies them: they are what an image-only or attachment-only message
// is made of (internal/shortsig signs them).
type Part struct {
	// Type is the lower-case media type ("image/png"), as declared.
	Type string
	// Size is the number of bytes after transfer decoding.
	Size int
	// Digest is the SHA-256 of the decoded bytes.
	Digest [sha256.Size]byte
	// Width and Height are the pixel dimensions of a GIF, PNG or JPEG
	// image, read from its header (the declared type does not matter); 0
	// when the content is not such an image or its header is unreadable.
	Width, Height int
	// Attachment is true when the part has Content-Disposition attachment.
	Attachment bool
}

// maxDocParts bounds Document.Parts (Options.MaxParts bounds the parts
// visited; this bounds what is kept of them).
const maxDocParts = 64

// binaryPart records a part that is not read as text (see Part). The
// work is linear in the part's size: one transfer decoding into a scratch
// buffer, one SHA-256, and an image header read.
func (p *parser) binaryPart(typ, cte string, body []byte, attachment bool) {
	if len(p.media) >= maxDocParts {
		return
	}
	data := p.transferDecode(p.bin[:0], body, cte, typ+" part")
	if cte == "base64" || cte == "quoted-printable" {
		p.bin = data
	}
	part := Part{Type: typ, Size: len(data), Digest: sha256.Sum256(data), Attachment: attachment}
	part.Width, part.Height = imageSize(data)
	p.media = append(p.media, part)
}

// dataURI records the content of a data: URI of an HTML src attribute
// ("data:image/png;base64,…", an image inlined in the HTML) as a non-text
// part: base64 content is decoded, other content is taken as it is.
func (p *parser) dataURI(val []byte) {
	rest := val[len("data:"):]
	comma := bytes.IndexByte(rest, ',')
	if comma < 0 {
		return
	}
	meta := strings.ToLower(string(rest[:comma]))
	typ, params, _ := strings.Cut(meta, ";")
	typ = strings.TrimSpace(typ)
	if typ == "" {
		typ = "text/plain"
	}
	cte := ""
	if strings.Contains(params, "base64") {
		cte = "base64"
	}
	p.binaryPart(typ, cte, rest[comma+1:], false)
}

// imageSize returns the dimensions of a GIF, PNG or JPEG image from its
// header, recognized by its magic bytes; 0, 0 otherwise.
func imageSize(b []byte) (w, h int) {
	var cfg image.Config
	var err error
	r := bytes.NewReader(b)
	switch {
	case bytes.HasPrefix(b, []byte("GIF8")):
		cfg, err = gif.DecodeConfig(r)
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		cfg, err = png.DecodeConfig(r)
	case bytes.HasPrefix(b, []byte("\xff\xd8")):
		cfg, err = jpeg.DecodeConfig(r)
	default:
		return 0, 0
	}
	if err != nil || cfg.Width < 0 || cfg.Height < 0 {
		return 0, 0
	}
	return cfg.Width, cfg.Height
}
