package pipeline

import (
	"strings"

	"github.com/emersion/go-msgauth/authres"
)

// AuthPass is one passing result of an Authentication-Results field
// (RFC 8601): the authserv-id of the host that added the field, the
// method ("dkim" or "dmarc") and the domain the result vouches for
// (DKIM's header.d, DMARC's header.from), in lower case. Anybody can
// write such a field: only the fields the server's own MTA added, by
// their authserv-id, say anything.
type AuthPass struct {
	Serv   string `json:"serv"`
	Method string `json:"method"`
	Domain string `json:"domain"`
}

// maxAuthPasses bounds the results kept of one message.
const maxAuthPasses = 16

// authPasses returns the passing DKIM and DMARC results of the fields
// values; a field that does not parse is skipped.
func authPasses(values []string) []AuthPass {
	var out []AuthPass
	for _, v := range values {
		serv, results, err := authres.Parse(v)
		if err != nil || serv == "" {
			continue
		}
		serv = strings.ToLower(serv)
		for _, r := range results {
			var p AuthPass
			switch r := r.(type) {
			case *authres.DKIMResult:
				if r.Value == authres.ResultPass {
					p = AuthPass{Serv: serv, Method: "dkim", Domain: r.Domain}
				}
			case *authres.DMARCResult:
				if r.Value == authres.ResultPass {
					p = AuthPass{Serv: serv, Method: "dmarc", Domain: r.From}
				}
			}
			p.Domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(p.Domain)), ".")
			if p.Method == "" || p.Domain == "" || len(p.Domain) > 253 {
				continue
			}
			out = append(out, p)
			if len(out) == maxAuthPasses {
				return out
			}
		}
	}
	return out
}
