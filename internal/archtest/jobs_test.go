package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The campaign engine by job (DEVELOPERS.md): the Checker decides on
// messages, the Ingester takes reports and administrative changes, the
// Reader is the read model; campaign.Engine only groups them for wiring.
// These rules are read from the product's source (non-test files).

// engineParts are campaign's types of the engine's jobs.
var engineParts = []string{"Engine", "Checker", "Ingester", "Reader"}

// campaignNames says which of engineParts a package may name: the
// packages not listed may name them all.
var campaignNames = map[string][]string{
	// The milter calls its own interfaces (Checker, Reporter), which the
	// daemon fills with the engine's Checker and Ingester.
	"internal/milter": {},
	// The dashboard reads through the read model and changes campaigns
	// (allow, delete) through the Ingester; it checks no message.
	"internal/dashboard": {"Reader", "Ingester"},
	// The report socket's client only sends bytes over the socket.
	"internal/reportclient": {},
	"cmd/nddmilter-pipe":    {},
}

// dialers are the functions that open a connection.
var dialers = []string{"Dial", "DialContext", "DialTimeout", "DialUnix"}

// unixDialers are the product packages that dial a unix socket, and why.
var unixDialers = map[string]string{
	"internal/reportclient": "the report socket's one client",
	"internal/milter":       "ListenSocket's probe of a socket file left behind (connects, sends nothing)",
}

// parseProduct parses the non-test Go files of the product package rel
// (relative to the module's root).
func parseProduct(t *testing.T, rel string) []*ast.File {
	t.Helper()
	dir := filepath.Join("..", "..", filepath.FromSlash(rel))
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// importName returns the name under which f imports path ("" when it
// does not).
func importName(f *ast.File, path string) string {
	for _, is := range f.Imports {
		if p, _ := strconv.Unquote(is.Path.Value); p == path {
			if is.Name != nil {
				return is.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// productPackages are the module's product packages, relative.
func productPackages(t *testing.T) []string {
	var out []string
	for rel := range listPackagesCached(t) {
		if !isLab(rel) && (!isTool(rel) || slices.Contains(productPrograms, rel)) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// TestEngineJobs: the packages listed in campaignNames name only the
// engine's parts they are allowed (the milter none: its interfaces).
func TestEngineJobs(t *testing.T) {
	for rel, allowed := range campaignNames {
		for _, f := range parseProduct(t, rel) {
			name := importName(f, module+"internal/campaign")
			if name == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				s, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := s.X.(*ast.Ident); ok && x.Name == name &&
					slices.Contains(engineParts, s.Sel.Name) && !slices.Contains(allowed, s.Sel.Name) {
					t.Errorf("%s names campaign.%s: it may name only %v of the engine's parts", rel, s.Sel.Name, allowed)
				}
				return true
			})
		}
	}
}

// TestStoreCapabilitiesAssertedOnce: the store's optional capabilities
// (store.SenderStore, ReporterLister, BatchReporter, EventStore) are
// asserted in one place, when the campaign engine is built over a store
// (campaign's core.capabilities), never at the call that needs one.
func TestStoreCapabilitiesAssertedOnce(t *testing.T) {
	for _, rel := range productPackages(t) {
		if rel == "internal/store" {
			continue
		}
		for _, f := range parseProduct(t, rel) {
			name := importName(f, module+"internal/store")
			if name == "" {
				continue
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				where := fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) > 0 {
					where = recvName(fd.Recv.List[0].Type) + "." + where
				}
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					ta, ok := n.(*ast.TypeAssertExpr)
					if !ok || ta.Type == nil {
						return true
					}
					s, ok := ta.Type.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if x, ok := s.X.(*ast.Ident); ok && x.Name == name &&
						!(rel == "internal/campaign" && where == "core.capabilities") {
						t.Errorf("%s: %s asserts store.%s: assert the store's capabilities once, in campaign's core.capabilities", rel, where, s.Sel.Name)
					}
					return true
				})
			}
		}
	}
}

func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

// TestOneReportSocketClient: internal/reportclient is the one client of
// the report socket: no other product package dials a unix socket (but
// those of unixDialers, for their reason).
func TestOneReportSocketClient(t *testing.T) {
	for _, rel := range productPackages(t) {
		if _, ok := unixDialers[rel]; ok {
			continue
		}
		for _, f := range parseProduct(t, rel) {
			ast.Inspect(f, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				s, ok := c.Fun.(*ast.SelectorExpr)
				if !ok || !slices.Contains(dialers, s.Sel.Name) {
					return true
				}
				for _, a := range c.Args {
					if l, ok := a.(*ast.BasicLit); ok && l.Kind == token.STRING && l.Value == `"unix"` {
						t.Errorf("%s dials a unix socket (%s): the report socket's one client is internal/reportclient", rel, s.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
