package spamgen

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Hostile is a message built to make a parser, a normalizer or a
// tokenizer do more work than its size warrants (the attacks of issue 11
// and their relatives). Parsers are tested and benchmarked against them:
// the work per input byte must not grow with the input.
type Hostile string

// The hostile messages. Each is a complete message with a short ordinary
// text followed by about size bytes of hostile content.
const (
	// FDFAPadding appends U+FDFA to a text/plain body; NFKC expands each
	// (3 bytes) to 18 characters (33 bytes).
	FDFAPadding Hostile = "fdfa-padding"
	// LigaturePadding appends a mix of the other long NFKC expansions
	// (U+FDFB, squared katakana, parenthesized ideographs, ligatures).
	LigaturePadding Hostile = "ligature-padding"
	// EncodedWordFlood is a Subject made of base64 RFC 2047 encoded-words in
	// one charset, each folded on its own line (joined before decoding).
	EncodedWordFlood Hostile = "encoded-word-flood"
	// MixedCharsetFlood alternates encoded-words of different charsets, so
	// that no two adjacent ones join.
	MixedCharsetFlood Hostile = "mixed-charset-flood"
	// BrokenEncodedWords is a Subject of "=?x?b?" openings never closed by
	// "?=".
	BrokenEncodedWords Hostile = "broken-encoded-words"
	// HugeHeader is a header of many short fields and one long folded
	// Subject of plain words.
	HugeHeader Hostile = "huge-header"
	// DeepNesting nests multipart/mixed entities inside each other, each
	// holding a short text part.
	DeepNesting Hostile = "deep-nesting"
	// ManyParts is a multipart/mixed body of many small text parts.
	ManyParts Hostile = "many-parts"
	// HTMLNesting is an HTML body of unclosed, styled elements nested
	// deeper and deeper, with text in between.
	HTMLNesting Hostile = "html-nesting"
	// HTMLAttributes is an HTML body of tags with many attributes and
	// links.
	HTMLAttributes Hostile = "html-attributes"
	// URLNearMiss is text full of "www." and "http" that are not URLs
	// (preceded by a letter) with no "://".
	URLNearMiss Hostile = "url-near-miss"
	// URLFlood is text of many distinct URLs.
	URLFlood Hostile = "url-flood"
	// PrefixTerms is text of distinct words that share their first six
	// letters and their length.
	PrefixTerms Hostile = "prefix-terms"
	// AstralLetters is text of letters outside the Basic Multilingual
	// Plane (mathematical alphanumerics, which NFKC folds to ASCII, and
	// CJK extension ideographs).
	AstralLetters Hostile = "astral-letters"
	// CombiningMarks is Latin text whose letters carry long runs of
	// combining marks.
	CombiningMarks Hostile = "combining-marks"
	// Base64Garbage is a base64 body whose lines alternate between valid
	// base64 and invalid bytes.
	Base64Garbage Hostile = "base64-garbage"
	// LongLine is one unbroken line of letters with no space.
	LongLine Hostile = "long-line"
)

// HostileKinds lists every Hostile message.
func HostileKinds() []Hostile {
	return []Hostile{FDFAPadding, LigaturePadding, EncodedWordFlood, MixedCharsetFlood,
		BrokenEncodedWords, HugeHeader, DeepNesting, ManyParts, HTMLNesting, HTMLAttributes,
		URLNearMiss, URLFlood, PrefixTerms, AstralLetters, CombiningMarks, Base64Garbage, LongLine}
}

// ParseHostile returns the Hostile message named s.
func ParseHostile(s string) (Hostile, error) {
	h := Hostile(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(HostileKinds(), h) {
		return h, nil
	}
	return "", fmt.Errorf("unknown hostile message %q", s)
}

const hostileText = "Dear customer, your account needs attention. Confirm your " +
	"details today at our secure portal to keep enjoying our services.\n\n"

// NewHostile returns the hostile message h with about size bytes of
// hostile content (at least one unit of it). The result is deterministic.
func NewHostile(h Hostile, size int) []byte {
	size = max(size, 1)
	var b strings.Builder
	b.Grow(size + 1024)
	head := func(subject, ctype string) {
		b.WriteString("From: Sender <sender@hostile.example>\r\n")
		b.WriteString("To: user@example.org\r\n")
		b.WriteString("Message-ID: <" + string(h) + "@hostile.example>\r\n")
		b.WriteString("Subject: " + subject + "\r\n")
		b.WriteString("MIME-Version: 1.0\r\n")
		b.WriteString("Content-Type: " + ctype + "\r\n\r\n")
	}
	plain := func() { head("Account notice", "text/plain; charset=utf-8"); b.WriteString(hostileText) }
	rng := rand.New(rand.NewPCG(uint64(len(h)), uint64(size)))
	repeat := func(unit string) {
		for n := b.Len() + size; b.Len() < n; {
			b.WriteString(unit)
		}
	}
	switch h {
	case FDFAPadding:
		plain()
		repeat("\uFDFA")
	case LigaturePadding:
		plain()
		repeat("\uFDFB\u3300\u3232\uFB03\u33FF\u2474\u3250")
	case EncodedWordFlood:
		word := "=?utf-8?b?" + base64.StdEncoding.EncodeToString([]byte("Prize waiting! ")) + "?="
		b.WriteString("From: Sender <sender@hostile.example>\r\nSubject: ")
		for n := b.Len() + size; b.Len() < n; {
			b.WriteString(word + "\r\n ")
		}
		b.WriteString("end\r\nContent-Type: text/plain\r\n\r\n" + hostileText)
	case MixedCharsetFlood:
		b.WriteString("From: Sender <sender@hostile.example>\r\nSubject: ")
		css := []string{"utf-8", "iso-8859-2", "windows-1251", "koi8-r", "x-unknown"}
		for i, n := 0, b.Len()+size; b.Len() < n; i++ {
			b.WriteString("=?" + css[i%len(css)] + "?b?" + base64.StdEncoding.EncodeToString([]byte("win\xe9")) + "?= ")
		}
		b.WriteString("\r\nContent-Type: text/plain\r\n\r\n" + hostileText)
	case BrokenEncodedWords:
		b.WriteString("From: Sender <sender@hostile.example>\r\nSubject: ")
		repeat("=?a?b?x")
		b.WriteString("\r\nContent-Type: text/plain\r\n\r\n" + hostileText)
	case HugeHeader:
		b.WriteString("From: Sender <sender@hostile.example>\r\n")
		for i, n := 0, b.Len()+size/2; b.Len() < n; i++ {
			fmt.Fprintf(&b, "X-Filler-%d: value %d\r\n", i, i)
		}
		b.WriteString("Subject: start")
		for n := b.Len() + size/2; b.Len() < n; {
			b.WriteString("\r\n\tword another longer")
		}
		b.WriteString("\r\nContent-Type: text/plain\r\n\r\n" + hostileText)
	case DeepNesting:
		head("Nested", "multipart/mixed; boundary=\"b0\"")
		for d := 0; b.Len() < size; d++ {
			fmt.Fprintf(&b, "--b%d\r\nContent-Type: text/plain\r\n\r\nlevel %d %s\r\n", d, d, hostileText)
			fmt.Fprintf(&b, "--b%d\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", d, d+1)
		}
	case ManyParts:
		head("Parts", "multipart/mixed; boundary=\"p\"")
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "--p\r\nContent-Type: text/plain\r\n\r\npart %d %s\r\n", i, hostileText)
		}
		b.WriteString("--p--\r\n")
	case HTMLNesting:
		head("Nested HTML", "text/html; charset=utf-8")
		b.WriteString("<html><body><p>" + hostileText + "</p>")
		repeat("<div style=\"color:red\"><span>text <b>word</b></span><p>para ")
	case HTMLAttributes:
		head("Attributes", "text/html; charset=utf-8")
		b.WriteString("<html><body><p>" + hostileText + "</p>")
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "<a href=\"http://h%d.example/p?q=%d&amp;r=1\" style=\"font-size:12px;display:block\" title=\"t\" class=\"c%d\" data-x=\"%d\">link %d</a>\n", i, i, i, i, i)
		}
	case URLNearMiss:
		plain()
		repeat("awww.bhttp.chttps//")
	case URLFlood:
		plain()
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "see https://host%d.example/path/%d. ", i%997, i)
		}
	case PrefixTerms:
		plain()
		word := []byte("prefixaaaaaa ")
		for b.Len() < size {
			for j := 6; j < 12; j++ {
				word[j] = byte('a' + rng.IntN(26))
			}
			b.Write(word)
		}
	case AstralLetters:
		plain()
		repeat("\U0001D41A\U0001D41B\U0001D41C\U0001D41D \U00020000\U00020001\U00020002 ")
	case CombiningMarks:
		plain()
		repeat("a\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308\u0309\u030a\u030b\u030c\u030d\u030e\u030f\u0310b ")
	case Base64Garbage:
		head("Garbage", "text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64")
		line := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("account details ", 3)))
		repeat(line + "\r\n" + "!!" + line + "\r\n")
	case LongLine:
		plain()
		repeat("abcdefghijklmnopqrstuvwxyz")
	default:
		plain()
	}
	return []byte(b.String())
}
