package mime

import (
	"fmt"
	"slices"
	"testing"
)

func TestVisibleTextFromHTML(t *testing.T) {
	tests := []struct {
		name string
		html string
		text string
		urls []string
	}{
		{"inline tags do not split words", `ve<b></b>ry <span>g</span>o<i>o</i>d`, "very good", nil},
		{"comments inside words", `ph<!-- x -->arma<!---->cy`, "pharmacy", nil},
		{"block tags separate words", `<p>one</p><p>two</p><div>three</div>four<br>five`, "one\ntwo\nthree\nfour\nfive", nil},
		{"table cells separate words", `<table><tr><td>cell</td><td>next</td></tr><tr><td>row</td></tr></table>`, "cell next\nrow", nil},
		{"list items", `<ul><li>alpha<li>beta</ul>gamma`, "alpha\nbeta\ngamma", nil},
		{"entities", `caf&eacute; &amp; cr&#232;me &lt;tag&gt; a&nbsp;b`, "café & crème <tag> a b", nil},
		{"white space collapses", "  many \n\t spaces   here ", "many spaces here", nil},
		{"pre keeps line breaks", "<pre>line one\nline two</pre>", "line one\nline two", nil},
		{"script style title dropped", `<html><head><title>The Title</title><style>p{color:red}</style></head><body><script>alert("x")</script>visible</body></html>`, "visible", nil},
		{"display none", `a <div style="display: none">hidden</div> b`, "a\nb", nil},
		{"display none upper case and important", `a <span style="COLOR:red; DISPLAY:NONE !important">hidden</span>b`, "a b", nil},
		{"visibility hidden", `<p style="visibility:hidden">x</p>y`, "y", nil},
		{"font-size zero", `<span style="font-size:0">zero</span><span style="font-size:1px">tiny</span><span style="font-size:0.1em">small</span>shown`, "shown", nil},
		{"font-size normal", `<span style="font-size:12px">shown</span>`, "shown", nil},
		{"line-height zero is visible", `<span style="line-height:0">shown</span>`, "shown", nil},
		{"opacity zero", `<span style="opacity:0">x</span>y`, "y", nil},
		{"zero height overflow hidden", `<div style="max-height:0;overflow:hidden">pre</div>body`, "body", nil},
		{"hidden attribute", `<span hidden>x</span>y`, "y", nil},
		{"nested hidden", `<div style="display:none"><p>a<b>b</b></p>c</div>d`, "d", nil},
		{"unclosed hidden p closed by next p", `<p style="display:none">hidden<p>shown`, "shown", nil},
		{"unknown element hidden", `<foo style="display:none">x</foo>y`, "y", nil},
		{"stray end tags", `</div></span>a</p>b`, "a\nb", nil},
		{"noscript and template", `<noscript>ns</noscript><template>tp</template>ok`, "ok", nil},
		{"urls from href src and text", `<a href="https://A.example.com/x">link</a> <img src="//cdn.example.net/i.png"> see http://b.example.org/path, or www.c.example.com.`,
			"link see http://b.example.org/path, or www.c.example.com.",
			[]string{"https://A.example.com/x", "//cdn.example.net/i.png", "http://b.example.org/path", "www.c.example.com"}},
		{"entity in href", `<a href="http://x.example/?a=1&amp;b=2">x</a><a href='http://x.example/?a=1&amp;b=2'>again</a>`, "xagain",
			[]string{"http://x.example/?a=1&b=2"}},
		{"implicit closes in tables", `<table><tr><td hidden>h<td>c1<tr><td>c2</table>after`, "c1\nc2\nafter", nil},
		{"implicit closes in lists", `<dl><dt hidden>t<dd>d1<dt>t2</dl><select><option hidden>o1<option>o2</select>`, "d1 t2\no2", nil},
		{"non-web schemes ignored", `<a href="mailto:a@b.c">m</a><img src="cid:123"><a href="javascript:x()">j</a>`, "m j", nil},
		{"homoglyphs and zero width", "p\u0430y\u200bpal", "paypal", nil},
		{"broken markup", `<p <b>x</b> <a href=">y</a>`, "x", nil},
		{"unterminated comment", `a<!-- never closed`, "a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, urls := VisibleTextFromHTML([]byte(tt.html))
			if text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
			if !slices.Equal(urls, tt.urls) {
				t.Errorf("urls = %q, want %q", urls, tt.urls)
			}
		})
	}
}

func TestURLHosts(t *testing.T) {
	tests := []struct {
		in   string
		host string
		ok   bool
	}{
		{"http://Example.COM/path", "example.com", true},
		{"HTTPS://user:pw@Shop.Example.org:8443/?q=1", "shop.example.org", true},
		{"//cdn.example.net/x", "cdn.example.net", true},
		{"www.example.com./x", "www.example.com", true},
		{"ftp://files.example.com", "files.example.com", true},
		{"http://[2001:db8::1]:80/", "[2001:db8::1]", true},
		{"http://bücher.example/", "bücher.example", true},
		{"http://bad host/", "", true},
		{"mailto:x@example.com", "", false},
		{"javascript:alert(1)", "", false},
		{"/relative/path", "", false},
	}
	for _, tt := range tests {
		host, ok := urlHost(tt.in)
		if host != tt.host || ok != tt.ok {
			t.Errorf("urlHost(%q) = %q, %v; want %q, %v", tt.in, host, ok, tt.host, tt.ok)
		}
	}
}

func TestTextURLs(t *testing.T) {
	tests := []struct {
		text string
		urls []string
	}{
		{"visit http://a.example.com/x.", []string{"http://a.example.com/x"}},
		{"(see https://b.example.com/p_(1)) and (www.c.example.com)", []string{"https://b.example.com/p_(1)", "www.c.example.com"}},
		{"<http://d.example.com/>", []string{"http://d.example.com/"}},
		{"xhttp://no.example.com and awww.no.com", nil},
		{"http:// alone, www. alone", nil},
		{"dup http://e.example.com http://e.example.com", []string{"http://e.example.com"}},
	}
	for _, tt := range tests {
		var u urlSet
		u.reset(defaultMaxURLs)
		u.scanText(tt.text)
		if !slices.Equal(u.urls, tt.urls) {
			t.Errorf("scanText(%q) = %q, want %q", tt.text, u.urls, tt.urls)
		}
	}
}

// TestURLSetLarge checks that URLs and hosts stay distinct and in order of
// first appearance past the size at which the set starts indexing them,
// and after a reset.
func TestURLSetLarge(t *testing.T) {
	var u urlSet
	for round := 0; round < 2; round++ {
		u.reset(defaultMaxURLs)
		var want, wantHosts []string
		for i := 0; i < 3*urlSetSmall; i++ {
			host := fmt.Sprintf("h%d.example.com", i%(urlSetSmall+5))
			url := fmt.Sprintf("http://%s/%d", host, i%(2*urlSetSmall+3))
			if !slices.Contains(want, url) {
				want = append(want, url)
			}
			if !slices.Contains(wantHosts, host) {
				wantHosts = append(wantHosts, host)
			}
			if i%2 == 0 {
				u.add(url)
			} else {
				u.addBytes([]byte(url))
			}
			u.addBytes([]byte("mailto:x@example.com"))
		}
		urls, hosts := u.take()
		if !slices.Equal(urls, want) || !slices.Equal(hosts, wantHosts) {
			t.Fatalf("round %d: urls %q hosts %q, want %q %q", round, urls, hosts, want, wantHosts)
		}
		if urls, hosts := u.take(); urls != nil || hosts != nil {
			t.Fatalf("take after take = %q %q", urls, hosts)
		}
	}
}
