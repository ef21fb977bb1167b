package natsd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

func TestProbe(t *testing.T) {
	seed, pub := userKey(t)
	s, err := Start(Options{Listen: "127.0.0.1:0", ClusterListen: "-", Dir: t.TempDir(), Users: []User{{Nkey: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	url := []string{s.ClientURL()}

	res, err := Probe(ctx, ClientOptions{URLs: url, NkeySeed: seed}, "NDDMILTER")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.StreamErr, jetstream.ErrStreamNotFound) || res.Stream != nil {
		t.Errorf("stream before creation: %v, %v; want ErrStreamNotFound", res.Stream, res.StreamErr)
	}

	// The in-process connection of the server's own node.
	nc, err := nats.Connect("", s.InProcess(), nats.Nkey(pub, func(nonce []byte) ([]byte, error) {
		kp, err := loadSeed(seed)
		if err != nil {
			return nil, err
		}
		return kp.Sign(nonce)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "NDDMILTER", Subjects: []string{"NDDMILTER.>"}}); err != nil {
		t.Fatal(err)
	}
	if res, err = Probe(ctx, ClientOptions{URLs: url, NkeySeed: seed}, "NDDMILTER"); err != nil || res.Stream == nil || res.Streams != 1 {
		t.Errorf("after creation: %+v, %v", res, err)
	}

	if _, err := Probe(ctx, ClientOptions{URLs: url}, ""); !errors.Is(err, ErrAuth) {
		t.Errorf("without credentials: %v, want ErrAuth", err)
	}
	port := freePorts(t, 1)[0]
	if _, err := Probe(ctx, ClientOptions{URLs: []string{fmt.Sprintf("nats://127.0.0.1:%d", port)}}, ""); !errors.Is(err, ErrUnreachable) {
		t.Errorf("nobody listening: %v, want ErrUnreachable", err)
	}
}

// loadSeed reads a user nkey seed file into a key pair.
func loadSeed(path string) (nkeys.KeyPair, error) {
	s, err := readSecret(path)
	if err != nil {
		return nil, err
	}
	return nkeys.FromSeed([]byte(s))
}
