package milter

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// rawMTA speaks the milter protocol byte by byte, as an MTA does, to test
// what go-milter's client cannot send (QUIT_NC, DATA, a last body chunk
// in the end-of-message packet, old protocol versions) and to count the
// packets the milter writes.
type rawMTA struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawMTA {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawMTA{t: t, c: c, br: bufio.NewReader(c)}
}

func packet(cmd byte, parts ...string) []byte {
	return appendPacket(nil, cmd, nil, true, parts...)
}

func macro(stage byte, kv ...string) []byte {
	return appendPacket(nil, cmdMacro, []byte{stage}, true, kv...)
}

func optneg(version, actions, protocol uint32) []byte {
	var b [12]byte
	binary.BigEndian.PutUint32(b[0:], version)
	binary.BigEndian.PutUint32(b[4:], actions)
	binary.BigEndian.PutUint32(b[8:], protocol)
	return appendPacket(nil, cmdOptNeg, b[:], false)
}

func (m *rawMTA) send(pkts ...[]byte) {
	m.t.Helper()
	m.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := m.c.Write(bytes.Join(pkts, nil)); err != nil {
		m.t.Fatal(err)
	}
}

// recv reads one packet.
func (m *rawMTA) recv() (byte, []byte) {
	m.t.Helper()
	m.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(m.br, hdr[:]); err != nil {
		m.t.Fatalf("read: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(m.br, b); err != nil {
		m.t.Fatalf("read: %v", err)
	}
	return b[0], b[1:]
}

// recvUntilFinal reads modifications up to the final reply.
func (m *rawMTA) recvUntilFinal() (mods []byte, final byte, data []byte) {
	m.t.Helper()
	for {
		code, d := m.recv()
		switch code {
		case repAddHeader, repChgHeader, repQuarantine:
			mods = append(mods, code)
		default:
			return mods, code, d
		}
	}
}

// nothingPending checks that the milter wrote nothing more.
func (m *rawMTA) nothingPending() {
	m.t.Helper()
	m.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if b, err := m.br.ReadByte(); err == nil {
		m.t.Fatalf("unexpected byte %q from the milter", b)
	}
}

func TestNegotiation(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	tests := []struct {
		name                      string
		version, actions, proto   uint32
		wantV, wantA, wantP       uint32
		wantClosed                bool
		wantRepliesHeader, wantNR bool
	}{
		{name: "postfix v6", version: 6, actions: 0x1ff, proto: 0x1fffff,
			wantV: 6, wantA: wantedActions, wantP: wantedProtocol},
		{name: "newer MTA", version: 7, actions: 0x1ff, proto: 0xffffffff,
			wantV: 6, wantA: wantedActions, wantP: wantedProtocol},
		{name: "sendmail v2 masks", version: 2, actions: 0x3f, proto: 0x7f,
			wantV: 2, wantA: wantedActions, wantP: protoNoHelo},
		{name: "no quarantine offered", version: 6, actions: 0x11, proto: 0,
			wantV: 6, wantA: actAddHeaders | actChgHeaders, wantP: 0},
		{name: "version 1 refused", version: 1, actions: 0x1, proto: 0, wantClosed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := dialRaw(t, h.addr)
			m.send(optneg(tt.version, tt.actions, tt.proto))
			if tt.wantClosed {
				m.c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := m.br.ReadByte(); err == nil {
					t.Fatal("answered a version-1 MTA")
				}
				return
			}
			code, d := m.recv()
			if code != cmdOptNeg || len(d) != 12 {
				t.Fatalf("reply %q, %d bytes", code, len(d))
			}
			v, a, p := binary.BigEndian.Uint32(d), binary.BigEndian.Uint32(d[4:]), binary.BigEndian.Uint32(d[8:])
			if v != tt.wantV || a != tt.wantA || p != tt.wantP {
				t.Errorf("negotiated v%d actions %#x protocol %#x, want v%d %#x %#x", v, a, p, tt.wantV, tt.wantA, tt.wantP)
			}
			if p&^tt.proto != 0 || a&^tt.actions != 0 {
				t.Errorf("asked for flags the MTA did not offer")
			}
		})
	}
}

// With every no-reply flag, a whole message costs one reply: the MTA
// streams it and reads the verdict once. The end-of-message packet may
// carry the last body chunk, and QUIT_NC starts a new connection on the
// same socket.
func TestNoReplyStreaming(t *testing.T) {
	c := &scriptChecker{}
	h := start(t, c, Options{})
	m := dialRaw(t, h.addr)
	m.send(optneg(6, 0x1ff, 0x1fffff))
	if code, _ := m.recv(); code != cmdOptNeg {
		t.Fatalf("reply %q", code)
	}
	message := func(subject, queueID string) [][]byte {
		return [][]byte{
			macro('M', "{mail_addr}", "a@example.net"),
			packet(cmdMail, "<a@example.net>", "SIZE=100"),
			packet(cmdRcpt, "<b@example.org>"),
			packet(cmdData),
			packet(cmdHeader, "From", "a@example.net"),
			packet(cmdHeader, "Subject", subject),
			packet(cmdHeader, "X-NDD-Verdict", "accept; forged"),
			packet(cmdEOH),
			appendPacket(nil, cmdBody, nil, false, "Hello,\r\n"),
			macro('E', "i", queueID),
			appendPacket(nil, cmdEOB, nil, false, "last line\r\n"),
		}
	}
	conn := [][]byte{macro('C', "j", "mx.example.org"), packet(cmdConnect, "mx.example.net", "4\x00\x19192.0.2.1")}

	m.send(append(conn, message("tag", "Q1")...)...)
	mods, final, _ := m.recvUntilFinal()
	if final != repAccept || !bytes.Contains(mods, []byte{repChgHeader}) || !bytes.Contains(mods, []byte{repAddHeader}) {
		t.Fatalf("tag: mods %q final %q", mods, final)
	}
	m.nothingPending()
	if raw := c.last(); !strings.HasSuffix(raw, "\r\n\r\nHello,\r\nlast line\r\n") || strings.Contains(raw, "X-NDD") {
		t.Errorf("engine saw %q", raw)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "queue_id=Q1") || !strings.Contains(logs, "client=192.0.2.1") {
		t.Errorf("log lacks queue id or client:\n%s", logs)
	}

	// Reject, then a new connection on the same socket (QUIT_NC).
	m.send(message("reject", "Q2")...)
	if _, final, d := m.recvUntilFinal(); final != repReplyCode || !strings.HasPrefix(string(d), "550 5.7.1 ") {
		t.Fatalf("reject: %q %q", final, d)
	}
	m.send(append(append([][]byte{packet(cmdQuitNC)}, conn...), message("hello", "Q3")...)...)
	if mods, final, _ := m.recvUntilFinal(); final != repAccept || len(mods) != 2 { // delete forged + verdict
		t.Fatalf("after QUIT_NC: mods %q final %q", mods, final)
	}
	m.nothingPending()
	m.send(packet(cmdQuit))
	m.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := m.br.ReadByte(); err != io.EOF {
		t.Errorf("after quit: %v, want EOF", err)
	}
}

// An MTA that waits for every step gets exactly one continue per step.
func TestReplyEachStep(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	m := dialRaw(t, h.addr)
	m.send(optneg(2, 0x3f, 0))
	m.recv()
	for _, p := range [][]byte{
		packet(cmdConnect, "mx.example.net", "U"),
		packet(cmdHelo, "mx.example.net"),
		packet(cmdMail, "<a@example.net>"),
		packet(cmdRcpt, "<b@example.org>"),
		packet(cmdHeader, "Subject", "quarantine"),
		packet(cmdEOH),
		appendPacket(nil, cmdBody, nil, false, "body\r\n"),
	} {
		m.send(p)
		if code, _ := m.recv(); code != repContinue {
			t.Fatalf("after %q: reply %q", p[4], code)
		}
	}
	m.send(packet(cmdAbort))
	m.nothingPending()
	m.send(packet(cmdMail, "<a@example.net>"))
	m.recv()
	m.send(packet(cmdHeader, "Subject", "quarantine"))
	m.recv()
	m.send(packet(cmdEOB))
	mods, final, _ := m.recvUntilFinal()
	if final != repAccept || !bytes.Contains(mods, []byte{repQuarantine}) {
		t.Fatalf("mods %q final %q", mods, final)
	}
}

// An MTA that does not allow quarantine gets headers only, and one
// warning per connection.
func TestActionNotAllowed(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	m := dialRaw(t, h.addr)
	m.send(optneg(6, actAddHeaders, 0x1fffff))
	m.recv()
	for i := 0; i < 2; i++ {
		m.send(packet(cmdMail, "<a@example.net>"), packet(cmdHeader, "Subject", "quarantine"),
			packet(cmdHeader, "X-NDD-Score", "1"), packet(cmdEOB))
		mods, final, _ := m.recvUntilFinal()
		if final != repAccept || string(mods) != "hhh" {
			t.Fatalf("mods %q final %q, want three headers", mods, final)
		}
	}
	if n := strings.Count(h.logs.String(), "does not allow"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, h.logs.String())
	}
}

func TestProtocolErrors(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	tests := []struct {
		name string
		in   []byte
	}{
		{"command before negotiation", packet(cmdMail, "<a@example.net>")},
		{"unknown command", append(optneg(6, 0x1ff, 0x1fffff), packet('Z')...)},
		{"short negotiation", appendPacket(nil, cmdOptNeg, []byte{0, 0, 0, 6}, false)},
		{"oversized packet", []byte{0x00, 0x20, 0x00, 0x00, cmdBody}},
		{"empty packet", []byte{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := dialRaw(t, h.addr)
			m.send(tt.in)
			m.c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.Copy(io.Discard, m.br); err != nil {
				t.Fatalf("connection not closed: %v", err)
			}
		})
	}
	if !strings.Contains(h.logs.String(), "milter protocol error") {
		t.Errorf("protocol errors not logged:\n%s", h.logs.String())
	}
}

// FuzzConn feeds arbitrary bytes to a milter connection as if from an
// MTA: it must never panic or hang, whatever arrives.
func FuzzConn(f *testing.F) {
	neg := optneg(6, 0x1ff, 0x1fffff)
	msg := bytes.Join([][]byte{
		neg,
		packet(cmdConnect, "mx", "4\x00\x19192.0.2.1"),
		packet(cmdMail, "<a@example.net>"),
		packet(cmdRcpt, "<b@example.org>"),
		packet(cmdHeader, "Subject", "tag"),
		packet(cmdHeader, "X-NDD-Verdict", "x"),
		packet(cmdEOH),
		appendPacket(nil, cmdBody, nil, false, "body"),
		macro('E', "i", "Q1"),
		packet(cmdEOB),
		packet(cmdQuitNC),
		packet(cmdQuit),
	}, nil)
	f.Add(msg)
	f.Add(append(optneg(2, 0x3f, 0), packet(cmdEOB)...))
	f.Add(append(neg, packet(cmdMacro)...))
	f.Add(append(neg, appendPacket(nil, cmdHeader, nil, false, "Subject")...))
	f.Add(append(neg, appendPacket(nil, cmdBody, nil, false, "no headers")...))
	f.Fuzz(func(t *testing.T, in []byte) {
		srv, err := New(&scriptChecker{}, Options{Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		server, client := net.Pipe()
		c := srv.track(server)
		done := make(chan struct{})
		go func() { c.serve(); close(done) }()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(in)
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("connection did not end")
		}
	})
}

// Sendmail sends the queue id with MAIL (the macro packet comes just
// before the command): it reaches the log line.
func TestQueueIDAtMailStage(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{})
	m := dialRaw(t, h.addr)
	m.send(optneg(6, 0x1ff, 0x1fffff))
	m.recv()
	m.send(macro('M', "i", "SQ12345"), packet(cmdMail, "<a@example.net>"), packet(cmdHeader, "Subject", "hello"), packet(cmdEOB))
	m.recvUntilFinal()
	if !strings.Contains(h.logs.String(), "queue_id=SQ12345") {
		t.Errorf("queue id of the MAIL stage lost:\n%s", h.logs.String())
	}
	// The next message does not inherit it.
	m.send(packet(cmdMail, "<a@example.net>"), packet(cmdHeader, "Subject", "hello"), packet(cmdEOB))
	m.recvUntilFinal()
	if n := strings.Count(h.logs.String(), "queue_id=SQ12345"); n != 1 {
		t.Errorf("queue id logged %d times, want once", n)
	}
}

// Every recipient's override counts, however many recipients come first.
func TestOverrideAfterManyRecipients(t *testing.T) {
	h := start(t, &scriptChecker{}, Options{Overrides: map[string]string{"abuse@example.org": "accept"}})
	m := dialRaw(t, h.addr)
	m.send(optneg(6, 0x1ff, 0x1fffff))
	m.recv()
	pkts := [][]byte{packet(cmdMail, "<a@example.net>")}
	for i := 0; i < 1500; i++ {
		pkts = append(pkts, packet(cmdRcpt, fmt.Sprintf("<user%d@example.net>", i)))
	}
	pkts = append(pkts, packet(cmdRcpt, "<abuse@example.org>"), packet(cmdHeader, "Subject", "reject"), packet(cmdEOB))
	m.send(pkts...)
	if _, final, d := m.recvUntilFinal(); final != repAccept {
		t.Fatalf("final %q %q, want accept (override of the 1501st recipient)", final, d)
	}
	if !strings.Contains(h.logs.String(), "rcpts=1501") {
		t.Errorf("recipient count not logged:\n%s", h.logs.String())
	}
}
