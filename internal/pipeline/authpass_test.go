package pipeline

import (
	"slices"
	"testing"
)

func TestAuthPasses(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   []AuthPass
	}{
		{"none", nil, nil},
		{"dkim and dmarc pass", []string{"mx.example.net; dkim=pass header.d=News.Example.org header.i=@news.example.org; dmarc=pass header.from=example.org; spf=pass smtp.mailfrom=example.org"},
			[]AuthPass{{"mx.example.net", "dkim", "news.example.org"}, {"mx.example.net", "dmarc", "example.org"}}},
		{"failures left out", []string{"MX.example.net; dkim=fail header.d=example.org; dmarc=none header.from=example.org"}, nil},
		{"several fields", []string{"mx.example.net; dkim=pass header.d=a.example", "other.example; dkim=pass header.d=b.example"},
			[]AuthPass{{"mx.example.net", "dkim", "a.example"}, {"other.example", "dkim", "b.example"}}},
		{"malformed", []string{"", ";;;", "mx.example.net; dkim="}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := authPasses(tt.values); !slices.Equal(got, tt.want) {
				t.Errorf("authPasses = %+v, want %+v", got, tt.want)
			}
		})
	}
}
