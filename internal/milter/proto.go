package milter

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The milter wire protocol (Sendmail 8 libmilter, version 6, as Postfix
// and Sendmail speak it). Every packet is a 4-byte big-endian length, a
// command or reply byte, and the data. The MTA opens with option
// negotiation (SMFIC_OPTNEG); the milter answers with the protocol
// version, the actions it may take and the protocol steps it wants
// changed: steps it does not need (SMFIP_NO*) and, since version 6, steps
// the MTA need not wait for a reply to (SMFIP_NR_*). With every no-reply
// flag granted, the MTA streams a whole message and waits once, for the
// verdict at end of message; go-milter's server (protocol version 2)
// made it wait for a reply to each of about 14 packets per message.

// Commands, MTA to milter.
const (
	cmdAbort   = 'A' // SMFIC_ABORT: forget the current message
	cmdBody    = 'B' // SMFIC_BODY: a body chunk
	cmdConnect = 'C' // SMFIC_CONNECT: host\0 family [port(2) address\0]
	cmdMacro   = 'D' // SMFIC_MACRO: stage, then name\0value\0 pairs
	cmdEOB     = 'E' // SMFIC_BODYEOB: end of message (may carry a last chunk)
	cmdHelo    = 'H' // SMFIC_HELO
	cmdQuitNC  = 'K' // SMFIC_QUIT_NC: quit, a new connection follows (v6)
	cmdHeader  = 'L' // SMFIC_HEADER: name\0value\0
	cmdMail    = 'M' // SMFIC_MAIL: sender\0 [esmtp args\0...]
	cmdEOH     = 'N' // SMFIC_EOH: end of headers
	cmdOptNeg  = 'O' // SMFIC_OPTNEG: version, actions, protocol (uint32 each)
	cmdQuit    = 'Q' // SMFIC_QUIT
	cmdRcpt    = 'R' // SMFIC_RCPT: recipient\0 [esmtp args\0...]
	cmdData    = 'T' // SMFIC_DATA (v4)
	cmdUnknown = 'U' // SMFIC_UNKNOWN: an unknown SMTP command (v3)
)

// Replies and modifications, milter to MTA.
const (
	repAccept     = 'a' // SMFIR_ACCEPT
	repContinue   = 'c' // SMFIR_CONTINUE
	repReplyCode  = 'y' // SMFIR_REPLYCODE: "ddd text\0"
	repTempfail   = 't' // SMFIR_TEMPFAIL
	repAddHeader  = 'h' // SMFIR_ADDHEADER: name\0value\0
	repChgHeader  = 'm' // SMFIR_CHGHEADER: index(4) name\0value\0 (empty value deletes)
	repQuarantine = 'q' // SMFIR_QUARANTINE: reason\0
	repDiscard    = 'd' // SMFIR_DISCARD: accept the message, then drop it
	repDelRcpt    = '-' // SMFIR_DELRCPT: recipient\0
)

// Action flags (SMFIF_*): what the milter may do at end of message.
const (
	actAddHeaders = 0x01  // SMFIF_ADDHDRS
	actDelRcpt    = 0x08  // SMFIF_DELRCPT
	actChgHeaders = 0x10  // SMFIF_CHGHDRS
	actQuarantine = 0x20  // SMFIF_QUARANTINE
	actSetSymList = 0x100 // SMFIF_SETSYMLIST: the milter names the macros it wants (v6)
)

// Macro stages (SMFIM_*) of the lists sent with SMFIF_SETSYMLIST.
const (
	stageEnvFrom = 2 // SMFIM_ENVFROM: with MAIL FROM
	stageEOM     = 5 // SMFIM_EOM: at end of message
)

// reportMacros are the macro lists nddmilter asks for when it takes
// reports by mail: the SASL login ({auth_authen}) with MAIL FROM, and the
// queue id (i) with MAIL (Sendmail) and at end of message (Postfix).
// Postfix empties the lists of the stages not named, so both stages are
// named; the lists are Postfix's and Sendmail's defaults for what
// nddmilter reads.
var reportMacros = []struct {
	stage uint32
	list  string
}{
	{stageEnvFrom, "i {auth_authen} {auth_type}"},
	{stageEOM, "i"},
}

// Protocol flags (SMFIP_*).
const (
	protoNoConnect = 1 << 0  // SMFIP_NOCONNECT
	protoNoHelo    = 1 << 1  // SMFIP_NOHELO
	protoNoMail    = 1 << 2  // SMFIP_NOMAIL
	protoNoRcpt    = 1 << 3  // SMFIP_NORCPT
	protoNoBody    = 1 << 4  // SMFIP_NOBODY
	protoNoHeaders = 1 << 5  // SMFIP_NOHDRS
	protoNoEOH     = 1 << 6  // SMFIP_NOEOH
	protoNRHeader  = 1 << 7  // SMFIP_NR_HDR (SMFIP_NOHREPL before v6)
	protoNoUnknown = 1 << 8  // SMFIP_NOUNKNOWN
	protoNoData    = 1 << 9  // SMFIP_NODATA
	protoNRConnect = 1 << 12 // SMFIP_NR_CONN
	protoNRHelo    = 1 << 13 // SMFIP_NR_HELO
	protoNRMail    = 1 << 14 // SMFIP_NR_MAIL
	protoNRRcpt    = 1 << 15 // SMFIP_NR_RCPT
	protoNRData    = 1 << 16 // SMFIP_NR_DATA
	protoNRUnknown = 1 << 17 // SMFIP_NR_UNKN
	protoNREOH     = 1 << 18 // SMFIP_NR_EOH
	protoNRBody    = 1 << 19 // SMFIP_NR_BODY
)

// wantedActions are the actions nddmilter asks for: add headers (the
// verdict), change headers (delete forged copies) and quarantine.
const wantedActions = actAddHeaders | actChgHeaders | actQuarantine

// wantedProtocol are the protocol changes nddmilter asks for, each only if
// the MTA offers it: no HELO, DATA or unknown commands (nothing in them
// matters), and no reply to any step before end of message (nddmilter
// never decides before it has the whole message).
const wantedProtocol = protoNoHelo | protoNoUnknown | protoNoData |
	protoNRConnect | protoNRHelo | protoNRMail | protoNRRcpt | protoNRData |
	protoNRUnknown | protoNRHeader | protoNREOH | protoNRBody

// noReplyAll are the no-reply flags of the steps an MTA sends for every
// message: with all of them the MTA streams a message and waits once.
const noReplyAll = protoNRMail | protoNRRcpt | protoNRHeader | protoNREOH | protoNRBody

// protocolVersion is the highest milter protocol version spoken.
const protocolVersion = 6

// maxPacket caps the length of one packet (command byte and data). The
// MTA sends body chunks of at most 64 KB and one header per packet;
// Postfix's header_size_limit is 100 KB by default.
const maxPacket = 1 << 20

// errProtocol marks a malformed packet: the connection is closed and the
// MTA applies its milter_default_action.
var errProtocol = errors.New("milter protocol error")

func protocolErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errProtocol}, args...)...)
}

// packetReader reads packets from a buffered stream into a reused buffer.
type packetReader struct {
	r   *bufio.Reader
	buf []byte
}

// next returns the next packet's command and data. The data is valid
// until the next call. Data of more than smallPacket bytes is read only
// if admit (when not nil) allows it, into a buffer of its own; otherwise
// it is skipped without being stored and dropped is true (data nil).
func (p *packetReader) next(admit func(cmd byte, n int) bool) (cmd byte, data []byte, dropped bool, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(p.r, hdr[:4]); err != nil {
		return 0, nil, false, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n == 0 || n > maxPacket {
		return 0, nil, false, protocolErrorf("packet length %d not in [1, %d]", n, maxPacket)
	}
	if _, err := io.ReadFull(p.r, hdr[4:]); err != nil {
		return 0, nil, false, fmt.Errorf("read packet: %w", unexpectedEOF(err))
	}
	cmd, m := hdr[4], int(n-1)
	var b []byte
	switch {
	case m <= smallPacket:
		if cap(p.buf) < m {
			p.buf = make([]byte, m, max(m, 4096))
		}
		b = p.buf[:m]
	case admit == nil || admit(cmd, m):
		b = make([]byte, m)
	default:
		if _, err := p.r.Discard(m); err != nil {
			return 0, nil, false, fmt.Errorf("read packet: %w", unexpectedEOF(err))
		}
		return cmd, nil, true, nil
	}
	if _, err := io.ReadFull(p.r, b); err != nil {
		return 0, nil, false, fmt.Errorf("read packet: %w", unexpectedEOF(err))
	}
	return cmd, b, false, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// appendPacket appends a packet with the given parts as data; the
// strings are NUL-terminated when cstr is set.
func appendPacket(dst []byte, code byte, prefix []byte, cstr bool, parts ...string) []byte {
	n := 1 + len(prefix)
	for _, s := range parts {
		n += len(s)
		if cstr {
			n++
		}
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, code)
	dst = append(dst, prefix...)
	for _, s := range parts {
		dst = append(dst, s...)
		if cstr {
			dst = append(dst, 0)
		}
	}
	return dst
}

// cstrings splits NUL-terminated strings; a last string without its NUL
// is kept (the MTA always sends it, a fuzzer may not).
func cstrings(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, 0)
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i])
		data = data[i+1:]
	}
	return out
}

// cstring returns the first NUL-terminated string of data and the rest.
func cstring(data []byte) (s, rest []byte) {
	i := bytes.IndexByte(data, 0)
	if i < 0 {
		return data, nil
	}
	return data[:i], data[i+1:]
}

// negotiation is what both sides agreed on.
type negotiation struct {
	version  uint32
	actions  uint32
	protocol uint32
}

// negotiate answers the MTA's SMFIC_OPTNEG: the lower of the two protocol
// versions, the wanted actions the MTA allows and the wanted protocol
// changes it offers. With reports (reports by mail are configured), the
// milter may also delete recipients (a report address among others) and
// names the macros it needs (reportMacros) when the MTA allows it
// (SMFIF_SETSYMLIST, protocol 6); otherwise the MTA's own lists apply,
// whose defaults carry them too (Postfix milter_mail_macros, Sendmail
// Milter.macros.envfrom).
func negotiate(data []byte, reports bool) (negotiation, error) {
	if len(data) < 12 {
		return negotiation{}, protocolErrorf("option negotiation of %d bytes, want 12", len(data))
	}
	v := binary.BigEndian.Uint32(data[0:4])
	if v < 2 {
		return negotiation{}, protocolErrorf("MTA speaks milter protocol version %d, need 2 or later", v)
	}
	want := uint32(wantedActions)
	if reports {
		want |= actDelRcpt
		if v >= 6 {
			want |= actSetSymList
		}
	}
	return negotiation{
		version:  min(v, protocolVersion),
		actions:  binary.BigEndian.Uint32(data[4:8]) & want,
		protocol: binary.BigEndian.Uint32(data[8:12]) & wantedProtocol,
	}, nil
}

func (n negotiation) reply(dst []byte) []byte {
	b := make([]byte, 12, 64)
	binary.BigEndian.PutUint32(b[0:4], n.version)
	binary.BigEndian.PutUint32(b[4:8], n.actions)
	binary.BigEndian.PutUint32(b[8:12], n.protocol)
	if n.actions&actSetSymList != 0 {
		for _, m := range reportMacros {
			b = binary.BigEndian.AppendUint32(b, m.stage)
			b = append(b, m.list...)
			b = append(b, 0)
		}
	}
	return appendPacket(dst, cmdOptNeg, b, false)
}

// replies reports whether the MTA waits for a reply to cmd.
func (n negotiation) replies(cmd byte) bool {
	var nr uint32
	switch cmd {
	case cmdConnect:
		nr = protoNRConnect
	case cmdHelo:
		nr = protoNRHelo
	case cmdMail:
		nr = protoNRMail
	case cmdRcpt:
		nr = protoNRRcpt
	case cmdData:
		nr = protoNRData
	case cmdUnknown:
		nr = protoNRUnknown
	case cmdHeader:
		nr = protoNRHeader
	case cmdEOH:
		nr = protoNREOH
	case cmdBody:
		nr = protoNRBody
	default:
		return false
	}
	return n.protocol&nr == 0
}

// connectInfo parses SMFIC_CONNECT leniently (it only feeds the logs):
// the client's address when given, else its host name.
func connectInfo(data []byte) string {
	host, rest := cstring(data)
	if len(rest) >= 3 && (rest[0] == '4' || rest[0] == '6') {
		// family, port, address
		if addr, _ := cstring(rest[3:]); len(addr) > 0 {
			return string(printable(addr))
		}
	}
	return string(printable(host))
}

// printable replaces control bytes, for values that end up in logs.
func printable(b []byte) []byte {
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			out := append([]byte(nil), b...)
			for j := i; j < len(out); j++ {
				if out[j] < ' ' || out[j] == 0x7f {
					out[j] = '_'
				}
			}
			return out
		}
	}
	return b
}
