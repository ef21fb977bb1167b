package natsd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// ConfigFile renders the options as a configuration file of the
// nats-server program (Debian's nats-server package, 2.9 or later), for a
// fleet whose NATS servers run outside the daemons: the same listeners,
// cluster, JetStream directory and limits, users with the same role
// permissions, TLS and route authentication as Start would use. Password
// files are read and their contents written into the file: keep it
// readable by the server only. monitor, when not empty, adds the HTTP
// monitoring listener (host:port).
func (o Options) ConfigFile(monitor string) (string, error) {
	so, err := o.serverOptions()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	q := strconv.Quote
	w := func(indent int, format string, a ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, a...)
		b.WriteByte('\n')
	}
	hp := func(host string, port int) string {
		if port < 0 {
			port = 0
		}
		return q(fmt.Sprintf("%s:%d", host, port))
	}
	w(0, "# nats-server configuration written by nddmilter (docs/FLEET.md)")
	w(0, "server_name: %s", q(so.ServerName))
	w(0, "listen: %s", hp(so.Host, so.Port))
	if monitor != "" {
		if _, _, err := splitHostPort(monitor); err != nil {
			return "", cfgErr("monitor %q: %v", monitor, err)
		}
		w(0, "http: %s", q(monitor))
	}
	if so.MaxPayload > 0 {
		w(0, "max_payload: %d", so.MaxPayload)
	}
	w(0, "jetstream {")
	w(1, "store_dir: %s", q(so.StoreDir))
	if so.JetStreamMaxStore > 0 {
		w(1, "max_file_store: %d", so.JetStreamMaxStore)
	}
	if so.JetStreamMaxMemory > 0 {
		w(1, "max_memory_store: %d", so.JetStreamMaxMemory)
	}
	w(0, "}")
	if o.TLS.Enabled() {
		w(0, "tls {")
		tlsBlock(w, 1, o.TLS, o.TLS.Verify)
		w(0, "}")
	}
	if len(so.Nkeys)+len(so.Users) > 0 {
		w(0, "authorization {")
		w(1, "users: [")
		for _, u := range so.Nkeys {
			w(2, "{ nkey: %s, permissions: %s }", q(u.Nkey), permConf(u.Permissions))
		}
		for _, u := range so.Users {
			w(2, "{ user: %s, password: %s, permissions: %s }", q(u.Username), q(u.Password), permConf(u.Permissions))
		}
		w(1, "]")
		w(0, "}")
	}
	if so.Cluster.Port != 0 {
		w(0, "cluster {")
		w(1, "name: %s", q(so.Cluster.Name))
		w(1, "listen: %s", hp(so.Cluster.Host, so.Cluster.Port))
		if so.Cluster.Username != "" {
			w(1, "authorization { user: %s, password: %s }", q(so.Cluster.Username), q(so.Cluster.Password))
		}
		if o.ClusterTLS.Enabled() {
			w(1, "tls {")
			tlsBlock(w, 2, o.ClusterTLS, true)
			w(1, "}")
		}
		if len(so.Routes) > 0 {
			w(1, "routes: [")
			for _, r := range so.Routes {
				w(2, "%s", q(r.String()))
			}
			w(1, "]")
		}
		w(0, "}")
	}
	return b.String(), nil
}

func tlsBlock(w func(int, string, ...any), indent int, t TLS, verify bool) {
	q := strconv.Quote
	if t.Cert != "" {
		w(indent, "cert_file: %s", q(t.Cert))
		w(indent, "key_file: %s", q(t.Key))
	}
	if t.CA != "" {
		w(indent, "ca_file: %s", q(t.CA))
	}
	if verify {
		w(indent, "verify: true")
	}
}

func permConf(p *server.Permissions) string {
	list := func(ss []string) string {
		qs := make([]string, len(ss))
		for i, s := range ss {
			qs[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(qs, ", ") + "]"
	}
	pub := "allow: " + list(p.Publish.Allow)
	if len(p.Publish.Deny) > 0 {
		pub += ", deny: " + list(p.Publish.Deny)
	}
	return fmt.Sprintf("{ publish: { %s }, subscribe: { allow: %s } }", pub, list(p.Subscribe.Allow))
}
