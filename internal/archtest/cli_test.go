package archtest

import (
	"go/ast"
	"go/token"
	"slices"
	"testing"
	"unicode"
)

// The command line chooses where its commands act (cmd/nddmilter's
// backend: the store itself, or the running daemon's API); the daemon
// only gives it the parts (a runtime over the store, where the running
// daemon's API is, the store-owner check) and knows nothing of that
// choice. These rules are read from the product's source (non-test files).

// cliWords are the words of the CLI's backend that no exported name of
// internal/daemon may contain.
var cliWords = []string{"Backend", "Maintenance", "Local", "Remote"}

// TestCLIChoosesItsBackend: internal/daemon names no api.Client (it
// serves the API; the command line is its client) and exports no name of
// the CLI's backend (cliWords, as whole words of the name: OpenBackend,
// RemoteMaintenance), and cmd/nddmilter asserts no daemon type (it works
// through its own backend interface).
func TestCLIChoosesItsBackend(t *testing.T) {
	for _, f := range parseProduct(t, "internal/daemon") {
		if name := importName(f, module+"internal/api"); name != "" {
			ast.Inspect(f, func(n ast.Node) bool {
				if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "Client" {
					if x, ok := s.X.(*ast.Ident); ok && x.Name == name {
						t.Errorf("internal/daemon names api.Client: the API's client is the command line's (cmd/nddmilter)")
					}
				}
				return true
			})
		}
		for _, name := range exportedNames(f) {
			if slices.ContainsFunc(camelWords(name), func(w string) bool { return slices.Contains(cliWords, w) }) {
				t.Errorf("internal/daemon exports %s: the CLI's backend (store or API) is cmd/nddmilter's", name)
			}
		}
	}
	for _, f := range parseProduct(t, "cmd/nddmilter") {
		name := importName(f, module+"internal/daemon")
		if name == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ta, ok := n.(*ast.TypeAssertExpr)
			if !ok || ta.Type == nil {
				return true
			}
			typ := ta.Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if s, ok := typ.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok && x.Name == name {
					t.Errorf("cmd/nddmilter asserts daemon.%s: it works through its own backend interface", s.Sel.Name)
				}
			}
			return true
		})
	}
}

// exportedNames lists the exported package-level names f declares.
func exportedNames(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				out = append(out, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, s.Name.Name)
					}
				case *ast.ValueSpec:
					if d.Tok == token.VAR || d.Tok == token.CONST {
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out
}

// camelWords splits a Go name into its words at upper-case letters
// (runs of capitals stay one word: APIURL is one word).
func camelWords(name string) []string {
	var words []string
	r := []rune(name)
	start := 0
	for i := 1; i < len(r); i++ {
		if unicode.IsUpper(r[i]) && (unicode.IsLower(r[i-1]) ||
			i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])) {
			words = append(words, string(r[start:i]))
			start = i
		}
	}
	return append(words, string(r[start:]))
}

func TestCamelWords(t *testing.T) {
	tests := []struct {
		name string
		want []string
	}{
		{"OpenBackend", []string{"Open", "Backend"}},
		{"RemoteMaintenance", []string{"Remote", "Maintenance"}},
		{"Local", []string{"Local"}},
		{"RunningAPIURL", []string{"Running", "APIURL"}},
		{"DefaultAPIURL", []string{"Default", "APIURL"}},
		{"LoadHTTPConfig", []string{"Load", "HTTP", "Config"}},
		{"Locality", []string{"Locality"}},
	}
	for _, tt := range tests {
		if got := camelWords(tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("camelWords(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
