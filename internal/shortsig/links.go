package shortsig

import (
	"net"
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// links returns the sorted distinct normalized links of urls (registrable
// domain and path), the sorted distinct registrable domains, and whether
// some link is outside the common domains. The slices are sc's (valid
// until sc is reused), the joined links' strings in its unit set's arena.
func (s *Signer) links(sc *scratch, urls []string) (links, domains []string, usable bool) {
	links, domains = sc.links[:0], sc.domains[:0]
	for _, raw := range urls {
		dom, path, ok := normalizeURL(raw)
		if !ok {
			continue
		}
		link := dom
		if path != "" {
			link = sc.set.arena.concat(dom, path)
		}
		links = append(links, link)
		domains = append(domains, dom)
		if !s.common[dom] {
			usable = true
		}
	}
	sc.links, sc.domains = links, domains
	return sortedSet(links), sortedSet(domains), usable
}

// normalizeURL reduces a URL of mime.Document.URLs (absolute, protocol
// relative or starting with "www.") to its registrable domain (eTLD+1 of
// the public suffix list, the host itself when it has none, e.g. an IP
// address) and its path without a trailing slash. Scheme, port, user,
// query and fragment are dropped: tracking parameters differ from copy to
// copy.
func normalizeURL(raw string) (domain, path string, ok bool) {
	switch {
	case strings.HasPrefix(raw, "//"):
		raw = "http:" + raw
	case !strings.Contains(raw, "://"):
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", "", false
	}
	domain = host
	if !mayBeIP(host) || net.ParseIP(host) == nil {
		if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
			domain = d
		}
	}
	return domain, strings.TrimRight(u.Path, "/"), true
}

// mayBeIP reports whether host may be an IP address: it has a colon
// (IPv6) or only digits and dots (IPv4). Most hosts are not, and are not
// given to net.ParseIP, which allocates its error.
func mayBeIP(host string) bool {
	ipv4 := true
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case c == ':':
			return true
		case c != '.' && (c < '0' || c > '9'):
			ipv4 = false
		}
	}
	return ipv4
}
