package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nddmilter/nddmilter/"

// floors is the one-way order of the product's packages (DEVELOPERS.md):
// a package imports only packages on lower floors. A new package under
// internal/ must be given a floor here, or listed in lab.
var floors = map[string]int{
	"internal/fmath":        0,
	"internal/buildinfo":    0,
	"internal/mailbox":      0,
	"internal/spool":        0,
	"internal/reportclient": 1,
	"internal/metrics":      1, // may use the shared action vocabulary
	"internal/action":       0,
	"internal/mime":         0,
	"internal/store":        0,
	"internal/fleet/natsd":  0,
	"internal/fleet":        4,
	"internal/imatchbag":    1,
	"internal/andd":         1,
	"internal/shortsig":     1,
	"internal/qgram":        1,
	"internal/ppjoin":       1,
	"internal/pipeline":     2,
	"internal/campaign":     3,
	"internal/config":       4,
	"internal/api":          4,
	"internal/dashboard":    4,
	"internal/milter":       4,
	"internal/daemon":       5,
	"internal/ledger":       0,
	"internal/zap/move":     0,
	"internal/zap/doveadm":  1,
	"internal/zap/imap":     1,
	"internal/zap":          4,
	"internal/archtest":     0,
}

// tools are the programs: the shipped ones (productPrograms) link the
// product only; nddlab and the scripts may import any package. Nothing
// imports a program.
var tools = []string{"cmd", "scripts"}

// productPrograms are the programs the package ships.
var productPrograms = []string{"cmd/nddmilter", "cmd/nddmilter-pipe"}

// lab are the measurement packages (and everything below these paths):
// above the product and apart from it. They may import the product; no
// product package or shipped program may depend on them.
var lab = []string{
	"internal/lab",
	"internal/testutil", // helpers of the tests
}

// labModules are the modules only the lab needs: the shipped nddmilter
// must not link them (TestProductBinaryModules).
var labModules = []string{
	"github.com/emersion/go-milter",   // the MTA side of bench milter
	"github.com/d--j/go-milter",       // the protocol server compared with the own (djmilter)
	"gonum.org/v1/gonum",              // the L-BFGS of training (anddtrain)
	"github.com/schollz/progressbar",  // progress of lexicon building, training and eval
	"github.com/spf13/cobra/doc",      // man pages: go run -tags gendocs ./cmd/nddmilter
	"github.com/cpuguy83/go-md2man",   // (cobra/doc's)
	"github.com/russross/blackfriday", // (go-md2man's)
}

// forbidden are rules beyond the floors: from must not depend on to,
// directly (direct) or through any chain of imports.
var forbidden = []struct {
	from   string
	to     []string
	direct bool
	// pending names the work that makes the rule hold; while it does
	// not, the rule is skipped.
	pending string
}{
	{from: "internal/campaign", to: []string{"internal/mime"}, direct: true},
	{from: "internal/store", to: []string{"internal/mime", "internal/imatchbag", "internal/andd", "internal/pipeline", "internal/campaign"}},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listPackages runs go list on the whole module (non-test files: what the
// binary links) and returns its packages by path relative to the module.
func listPackages(t *testing.T) map[string]*pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		p.Imports = internalOnly(p.Imports)
		p.Deps = internalOnly(p.Deps)
		pkgs[rel] = &p
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package of the module")
	}
	return pkgs
}

func internalOnly(paths []string) []string {
	var out []string
	for _, p := range paths {
		if rel, ok := strings.CutPrefix(p, module); ok {
			out = append(out, rel)
		}
	}
	return out
}

func isTool(rel string) bool { return under(rel, tools) }

func isLab(rel string) bool { return under(rel, lab) }

func under(rel string, roots []string) bool {
	for _, l := range roots {
		if rel == l || strings.HasPrefix(rel, l+"/") {
			return true
		}
	}
	return false
}

// TestProductDoesNotLinkLab: no product package and no shipped program
// depends, even indirectly, on a lab package.
func TestProductDoesNotLinkLab(t *testing.T) {
	for rel, p := range listPackagesCached(t) {
		if isLab(rel) || isTool(rel) && !slices.Contains(productPrograms, rel) {
			continue
		}
		for _, d := range p.Deps {
			if isLab(d) {
				t.Errorf("%s depends on the lab package %s (chain: %s)", rel, d, chain(t, rel, d))
			}
		}
	}
}

// TestFloors: every product package has a floor and imports only lower
// floors (and no tool); a lab package imports no program either.
func TestFloors(t *testing.T) {
	pkgs := listPackagesCached(t)
	for rel, p := range pkgs {
		if isLab(rel) {
			for _, imp := range p.Imports {
				if isTool(imp) {
					t.Errorf("the lab package %s imports the program %s", rel, imp)
				}
			}
			continue
		}
		if isTool(rel) {
			continue
		}
		f, ok := floors[rel]
		if !ok {
			t.Errorf("%s has no floor: add it to floors (or lab) in internal/archtest and to DEVELOPERS.md", rel)
			continue
		}
		for _, imp := range p.Imports {
			if isLab(imp) {
				continue // TestProductDoesNotLinkLab reports it
			}
			if isTool(imp) {
				t.Errorf("%s imports the program %s", rel, imp)
			}
			if fi, ok := floors[imp]; ok && fi >= f {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports go down the floors only", rel, f, imp, fi)
			}
		}
	}
}

// TestForbiddenImports checks the rules beyond the floors.
func TestForbiddenImports(t *testing.T) {
	pkgs := listPackagesCached(t)
	for _, r := range forbidden {
		t.Run(strings.ReplaceAll(r.from, "/", "_"), func(t *testing.T) {
			p, ok := pkgs[r.from]
			if !ok {
				t.Fatalf("no package %s", r.from)
			}
			have := p.Deps
			if r.direct {
				have = p.Imports
			}
			var bad []string
			for _, to := range r.to {
				if slices.Contains(have, to) {
					bad = append(bad, to)
				}
			}
			switch {
			case len(bad) > 0 && r.pending != "":
				t.Skipf("pending (%s): %s imports %v", r.pending, r.from, bad)
			case len(bad) > 0:
				for _, b := range bad {
					t.Errorf("%s must not depend on %s (chain: %s)", r.from, b, chain(t, r.from, b))
				}
			case r.pending != "":
				t.Logf("rule %s ↛ %v now holds: remove its pending mark", r.from, r.to)
			}
		})
	}
}

// chain returns an import path from one package to another, for messages.
func chain(t *testing.T, from, to string) string {
	t.Helper()
	pkgs := listPackagesCached(t)
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for c := to; c != ""; c = prev[c] {
				path = append(path, c)
			}
			slices.Reverse(path)
			return strings.Join(path, " → ")
		}
		if p := pkgs[cur]; p != nil {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return from + " → … → " + to
}

var cached map[string]*pkg

// listPackagesCached runs go list once per test binary (the tests do not
// run in parallel).
func listPackagesCached(t *testing.T) map[string]*pkg {
	t.Helper()
	if cached == nil {
		cached = listPackages(t)
	}
	return cached
}

// TestPipeProgramStaysSmall: cmd/nddmilter-pipe, which Dovecot starts for
// every Junk move, links the standard library and the report client only
// (no store, no metrics, no NATS, no CLI framework: their package
// initialisation is most of a bigger program's start), and
// golang.org/x/sys/unix for the spool's openat calls (no initialisation
// to speak of).
func TestPipeProgramStaysSmall(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/nddmilter-pipe")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := []string{"cmd/nddmilter-pipe", "internal/reportclient", "internal/spool"}
	for _, p := range strings.Fields(string(out)) {
		if p == "golang.org/x/sys/unix" {
			continue
		}
		if rel, ok := strings.CutPrefix(p, module); ok {
			if !slices.Contains(allowed, rel) {
				t.Errorf("cmd/nddmilter-pipe links %s", rel)
			}
			continue
		}
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			t.Errorf("cmd/nddmilter-pipe links the module package %s", p)
		}
	}
}

// TestProductBinaryModules: what `go list -deps ./cmd/nddmilter` lists —
// what the shipped binary links — holds no lab package and none of the
// modules only the lab needs.
func TestProductBinaryModules(t *testing.T) {
	for _, prog := range productPrograms {
		cmd := exec.Command("go", "list", "-deps", "./"+prog)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", prog, err)
		}
		for _, p := range strings.Fields(string(out)) {
			if rel, ok := strings.CutPrefix(p, module); ok && isLab(rel) {
				t.Errorf("%s links the lab package %s", prog, rel)
			}
			for _, m := range labModules {
				if p == m || strings.HasPrefix(p, m+"/") {
					t.Errorf("%s links %s, which only the lab needs", prog, p)
				}
			}
		}
	}
}
