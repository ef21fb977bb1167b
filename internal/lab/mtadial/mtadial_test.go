package mtadial

import (
	"io"
	"net"
	"testing"
)

// Writes are held until a read, then sent in one piece.
func TestWritesFlushedBeforeRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 6)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		got <- b
		c.Write([]byte("ok"))
	}()
	c, err := Dialer{}.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("abc"))
	c.Write([]byte("def"))
	reply := make([]byte, 2)
	if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "ok" {
		t.Fatalf("reply %q, %v", reply, err)
	}
	if b := <-got; string(b) != "abcdef" {
		t.Errorf("server got %q", b)
	}
}
