package natsd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// freePorts returns n free loopback ports.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ps []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ps = append(ps, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ps
}

// withFreePorts calls start with n loopback ports picked free. Another
// process can take one between the pick and the server's listen (the
// kernel hands the same range to outgoing connections); start then fails
// with "address already in use", having shut down what it started, and
// is called again on new ports, at most three times.
func withFreePorts(t *testing.T, n int, start func(ports []int) error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := start(freePorts(t, n))
		if err == nil {
			return
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("again on new ports: %v", err)
	}
}

// shutdownAll shuts servers down (the servers of a failed start).
func shutdownAll(servers []*Server) {
	for _, s := range servers {
		_ = s.Shutdown(context.Background())
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testPKI is a CA and certificates signed by it, as PEM files.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	OtherCA                                          string // a CA that signed nothing here
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	pemCert := func(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }
	pemKey := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
	}
	mkCA := func(cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c, k, der
	}
	ca, caKey, caDER := mkCA("nddmilter test CA")
	_, _, otherDER := mkCA("unrelated CA")
	leaf := func(serial int64, cn string) (cert, k []byte) {
		lk := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &lk.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pemCert(der), pemKey(lk)
	}
	sc, sk := leaf(2, "server")
	cc, ck := leaf(3, "client")
	return testPKI{
		CA:         writeFile(t, dir, "ca.pem", pemCert(caDER)),
		OtherCA:    writeFile(t, dir, "other-ca.pem", pemCert(otherDER)),
		ServerCert: writeFile(t, dir, "server.pem", sc), ServerKey: writeFile(t, dir, "server-key.pem", sk),
		ClientCert: writeFile(t, dir, "client.pem", cc), ClientKey: writeFile(t, dir, "client-key.pem", ck),
	}
}

// userKey makes an nkey pair, the seed in a file.
func userKey(t *testing.T) (seedFile, public string) {
	t.Helper()
	seed, pub, err := NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, t.TempDir(), "seed.nk", append(seed, '\n')), pub
}

// TestClusterAuthTLS: three servers on loopback with routes over mutual
// TLS, TLS on the client listeners and nkey users form a JetStream cluster
// that takes an R3 stream; a node's key publishes, a reader's key and a
// client without credentials cannot.
func TestClusterAuthTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	pki := newPKI(t)
	nodeSeed, nodePub := userKey(t)
	readSeed, readPub := userKey(t)
	srvTLS := TLS{CA: pki.CA, Cert: pki.ServerCert, Key: pki.ServerKey}
	var servers []*Server
	withFreePorts(t, 3, func(cp []int) error {
		var routes []string
		for _, p := range cp {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		}
		servers = nil
		for i, p := range cp {
			s, err := Start(Options{
				Name:          fmt.Sprintf("n%d", i),
				Listen:        "127.0.0.1:0",
				ClusterListen: fmt.Sprintf("127.0.0.1:%d", p),
				Routes:        routes,
				Dir:           t.TempDir(),
				Users:         []User{{Nkey: nodePub}, {Nkey: readPub, Role: RoleRead}},
				TLS:           srvTLS,
				ClusterTLS:    srvTLS,
			})
			if err != nil {
				shutdownAll(servers)
				return fmt.Errorf("server %d: %w", i, err)
			}
			servers = append(servers, s)
		}
		return nil
	})
	t.Cleanup(func() {
		for _, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.Shutdown(ctx); err != nil {
				t.Error(err)
			}
			cancel()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.WaitJetStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	if !strings.HasPrefix(urls[0], "tls://") {
		t.Errorf("client URL %q: want tls://", urls[0])
	}
	clientTLS := TLS{CA: pki.CA}
	connect := func(c ClientOptions) *nats.Conn {
		t.Helper()
		c.URLs, c.TLS = urls, clientTLS
		nc, err := c.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nc := connect(ClientOptions{NkeySeed: nodeSeed, Name: "node"})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The meta leader may still be settling: bounded retries.
	var st jetstream.Stream
	for i := 0; ; i++ {
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		st, err = js.CreateStream(actx, jetstream.StreamConfig{Name: "NDDMILTER", Subjects: []string{"NDDMILTER.>"}, Replicas: 3})
		acancel()
		if err == nil {
			break
		}
		if i == 5 || ctx.Err() != nil {
			t.Fatalf("create stream: %v", err)
		}
	}
	for i := range 10 {
		if _, err := js.Publish(ctx, "NDDMILTER.events", []byte("r"), jetstream.WithMsgID(fmt.Sprint("id-", i%5))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 5 {
		t.Errorf("stream has %d messages, want 5 (10 publishes, 5 ids)", info.State.Msgs)
	}
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Errorf("stream cluster info %+v: want a leader and 2 replicas", info.Cluster)
	}
	leaders := 0
	for _, s := range servers {
		if s.IsStreamLeader("NDDMILTER") {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d servers lead the stream, want 1", leaders)
	}

	// A reader reads the stream but cannot publish events.
	rc := connect(ClientOptions{NkeySeed: readSeed, Name: "reader"})
	rjs, _ := jetstream.New(rc)
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = rjs.Publish(pctx, "NDDMILTER.events", []byte("forged"))
	pcancel()
	if err == nil {
		t.Error("a reader published an event")
	}
	if ri, err := rjs.Stream(ctx, "NDDMILTER"); err != nil {
		t.Errorf("reader: stream info: %v", err)
	} else if n := ri.CachedInfo().State.Msgs; n != 5 {
		t.Errorf("reader sees %d messages, want 5", n)
	}

	// Without credentials: refused at connect.
	opts, err := ClientOptions{URLs: urls, TLS: clientTLS}.NatsOptions()
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.RetryOnFailedConnect(false), nats.MaxReconnects(0))
	if anon, err := nats.Connect(strings.Join(urls, ","), opts...); err == nil {
		anon.Close()
		t.Error("a client without credentials connected")
	} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("anonymous connect: %v, want an authorization error", err)
	}

	// Kill the stream leader: the other two elect a new one and take
	// publishes.
	for i, s := range servers {
		if s.IsStreamLeader("NDDMILTER") {
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			if err := s.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}
			scancel()
			servers = append(servers[:i], servers[i+1:]...)
			break
		}
	}
	var pubErr error
	for range 40 {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, pubErr = js.Publish(pctx, "NDDMILTER.events", []byte("after"), jetstream.WithMsgID("after"))
		pcancel()
		if pubErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pubErr != nil {
		t.Errorf("publish after the leader's shutdown: %v", pubErr)
	}
}

// TestClientTLSVerify: a server requiring client certificates accepts a
// client with one signed by its CA, and refuses one without a certificate
// or trusting another CA; a password user authenticates.
func TestClientTLSVerify(t *testing.T) {
	pki := newPKI(t)
	pw := writeFile(t, t.TempDir(), "pw", []byte("s3cret\n"))
	s, err := Start(Options{
		Listen: "127.0.0.1:0", ClusterListen: "-", Dir: t.TempDir(),
		Users: []User{{Name: "mx1", PasswordFile: pw}},
		TLS:   TLS{CA: pki.CA, Cert: pki.ServerCert, Key: pki.ServerKey, Verify: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	if err := s.WaitJetStream(context.Background()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    ClientOptions
		ok   bool
	}{
		{"client cert and password", ClientOptions{User: "mx1", PasswordFile: pw, TLS: TLS{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}}, true},
		{"no client cert", ClientOptions{User: "mx1", PasswordFile: pw, TLS: TLS{CA: pki.CA}}, false},
		{"server not trusted", ClientOptions{User: "mx1", PasswordFile: pw, TLS: TLS{CA: pki.OtherCA, Cert: pki.ClientCert, Key: pki.ClientKey}}, false},
		{"no password", ClientOptions{TLS: TLS{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}}, false},
		{"plain text", ClientOptions{User: "mx1", PasswordFile: pw}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := s.ClientURL()
			if tc.name == "plain text" {
				url = strings.Replace(url, "tls://", "nats://", 1)
			}
			tc.c.URLs = []string{url}
			opts, err := tc.c.NatsOptions()
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, nats.RetryOnFailedConnect(false), nats.MaxReconnects(0))
			nc, err := nats.Connect(url, opts...)
			if err == nil {
				defer nc.Close()
				err = nc.Flush()
			}
			if (err == nil) != tc.ok {
				t.Errorf("connect: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	pw := writeFile(t, dir, "pw", []byte("x\n"))
	empty := writeFile(t, dir, "empty", nil)
	_, pub := userKey(t)
	tests := []struct {
		name string
		o    Options
		want string // "" = valid
	}{
		{"defaults", Options{Dir: dir}, "no users"},
		{"defaults and a user", Options{Dir: dir, Users: []User{{Nkey: pub}}}, ""},
		{"admin", Options{Dir: dir, Users: []User{{Nkey: pub, Role: RoleAdmin}}}, ""},
		{"no dir", Options{}, "dir"},
		{"bad listen", Options{Dir: dir, Listen: "4222"}, "listen"},
		{"open without users", Options{Dir: dir, Listen: "0.0.0.0:4222"}, "no users"},
		{"open with users", Options{Dir: dir, Listen: "0.0.0.0:4222", Users: []User{{Nkey: pub}}, ClusterListen: "-"}, ""},
		{"bad nkey", Options{Dir: dir, Users: []User{{Nkey: "SUABC"}}}, "not a user public key"},
		{"nkey and user", Options{Dir: dir, Users: []User{{Nkey: pub, Name: "a", PasswordFile: pw}}}, "not both"},
		{"empty user", Options{Dir: dir, Users: []User{{}}}, "set nkey or user"},
		{"missing password file", Options{Dir: dir, Users: []User{{Name: "a", PasswordFile: dir + "/none"}}}, "password_file"},
		{"empty password file", Options{Dir: dir, Users: []User{{Name: "a", PasswordFile: empty}}}, "empty"},
		{"bad role", Options{Dir: dir, Users: []User{{Nkey: pub, Role: "root"}}}, "role"},
		{"bad route scheme", Options{Dir: dir, Routes: []string{"http://127.0.0.1:6222"}}, "scheme"},
		{"route without port", Options{Dir: dir, Routes: []string{"nats-route://127.0.0.1"}}, "route"},
		{"routes without cluster", Options{Dir: dir, ClusterListen: "-", Routes: []string{"nats-route://127.0.0.1:6222"}}, "cluster_listen"},
		{"open cluster unauthenticated", Options{Dir: dir, ClusterListen: "0.0.0.0:6222"}, "not authenticated"},
		{"open cluster with user", Options{Dir: dir, ClusterListen: "0.0.0.0:6222", ClusterUser: "route", ClusterPasswordFile: pw, Users: []User{{Nkey: pub}}}, ""},
		{"cluster password without user", Options{Dir: dir, ClusterPasswordFile: pw}, "needs cluster_user"},
		{"cluster tls incomplete", Options{Dir: dir, ClusterTLS: TLS{CA: pw}}, "cluster_tls"},
		{"tls without key", Options{Dir: dir, TLS: TLS{Cert: pw}}, "cert and key"},
		{"tls bad files", Options{Dir: dir, TLS: TLS{Cert: pw, Key: pw}}, "tls"},
		{"negative store", Options{Dir: dir, MaxStore: -1}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestClientOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	seed, _ := userKey(t)
	pw := writeFile(t, dir, "pw", []byte("x"))
	notSeed := writeFile(t, dir, "notseed", []byte("hello"))
	u := []string{"nats://127.0.0.1:4222"}
	tests := []struct {
		name string
		c    ClientOptions
		want string
	}{
		{"nkey", ClientOptions{URLs: u, NkeySeed: seed}, ""},
		{"user", ClientOptions{URLs: u, User: "a", PasswordFile: pw}, ""},
		{"anonymous", ClientOptions{URLs: []string{"nats://a:1", "tls://b:2"}}, ""},
		{"no urls", ClientOptions{}, "no server URL"},
		{"bad scheme", ClientOptions{URLs: []string{"http://127.0.0.1:4222"}}, "scheme"},
		{"no port", ClientOptions{URLs: []string{"nats://127.0.0.1"}}, "nats.urls"},
		{"two methods", ClientOptions{URLs: u, NkeySeed: seed, User: "a"}, "one of"},
		{"missing creds", ClientOptions{URLs: u, Creds: dir + "/none.creds"}, "nats.creds"},
		{"not a seed", ClientOptions{URLs: u, NkeySeed: notSeed}, "nkey seed"},
		{"password without user", ClientOptions{URLs: u, PasswordFile: pw}, "needs nats.user"},
		{"cert without key", ClientOptions{URLs: u, TLS: TLS{Cert: pw}}, "go together"},
		{"missing ca", ClientOptions{URLs: u, TLS: TLS{CA: dir + "/none"}}, "nats.tls.ca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestUserKey(t *testing.T) {
	seed, pub, err := NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(seed), "SU") || !strings.HasPrefix(pub, "U") {
		t.Fatalf("seed %.2s… public %.1s…: want SU… and U…", seed, pub)
	}
	got, err := UserSeedPublicKey(append(seed, '\n'))
	if err != nil || got != pub {
		t.Fatalf("UserSeedPublicKey = %q, %v; want %q", got, err, pub)
	}
	if _, err := UserSeedPublicKey([]byte("SAnotaseed")); !errors.Is(err, ErrNotUserSeed) {
		t.Fatalf("bad seed: %v, want ErrNotUserSeed", err)
	}
}

// TestRouteAuth: servers sharing the route user and password form a
// cluster; a server without them cannot join.
func TestRouteAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 servers")
	}
	pw := writeFile(t, t.TempDir(), "route.pw", []byte("r0ute-secret\n"))
	_, pub := userKey(t)
	var a, b *Server
	withFreePorts(t, 3, func(cp []int) error {
		routes := []string{fmt.Sprintf("nats-route://127.0.0.1:%d", cp[0]), fmt.Sprintf("nats-route://127.0.0.1:%d", cp[1])}
		var started []*Server
		start := func(i int, user, pwFile string) (*Server, error) {
			s, err := Start(Options{
				Name: fmt.Sprintf("r%d", i), Listen: "127.0.0.1:0", ClusterListen: fmt.Sprintf("127.0.0.1:%d", cp[i]),
				Routes: routes, Dir: t.TempDir(), ClusterUser: user, ClusterPasswordFile: pwFile, Users: []User{{Nkey: pub}},
			})
			if err != nil {
				shutdownAll(started)
				return nil, fmt.Errorf("server %d: %w", i, err)
			}
			started = append(started, s)
			return s, nil
		}
		var err error
		if a, err = start(0, "route", pw); err != nil {
			return err
		}
		if b, err = start(1, "route", pw); err != nil {
			return err
		}
		if _, err = start(2, "", ""); err != nil { // the intruder, without the route password
			return err
		}
		t.Cleanup(func() { shutdownAll(started) })
		return nil
	})
	routed := func(s *Server, want int) bool {
		for range 100 {
			if s.ns.NumRoutes() >= want {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	if !routed(a, 1) || !routed(b, 1) {
		t.Fatalf("servers with the route password did not connect: %d, %d routes", a.ns.NumRoutes(), b.ns.NumRoutes())
	}
	// During the intruder's route attempts, the two route only to each other:
	// none of them is ever admitted. (The intruder's own count may show a
	// route it is attempting, before the other side refuses it.)
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		for _, s := range []*Server{a, b} {
			rz, err := s.ns.Routez(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rz.Routes { // (pooled: several routes to one peer)
				if r.RemoteName != "r0" && r.RemoteName != "r1" {
					t.Fatalf("a route to %q, not the other server with the password: %+v", r.RemoteName, r)
				}
			}
		}
	}
}

// TestStartPortInUse: a listen address already taken (by another server,
// or a second daemon on the same host) makes Start fail at once with the
// server's own words, not after its ready timeout with a guess.
func TestStartPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	tests := []struct {
		name string
		opt  Options
		want string
	}{
		{"client port", Options{Listen: addr, ClusterListen: "-"}, "Error listening on port"},
		{"route port", Options{Listen: "127.0.0.1:0", ClusterListen: addr, Routes: []string{"nats-route://" + addr}}, "Error listening on router port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Dir = t.TempDir()
			_, pub := userKey(t)
			tt.opt.Users = []User{{Nkey: pub}}
			tt.opt.ReadyTimeout = time.Hour // the fatal line ends the wait, not this
			s, err := Start(tt.opt)
			if err == nil {
				_ = s.Shutdown(context.Background())
				t.Fatal("started on a port in use")
			}
			if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("error %q: want ErrNotReady with %q and the cause", err, tt.want)
			}
		})
	}
}
