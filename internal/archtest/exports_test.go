package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// labOnlyAllowed are exported identifiers of product packages that only
// the lab uses, each with the reason it stays (the key is what
// TestNoExportForTheLabOnly prints).
var labOnlyAllowed = map[string]string{
	// The features are the model's definition, a wire format that stays
	// in andd; the optimizer that learns their weights is the lab's
	// (internal/lab/anddtrain). The daemon weighs through a Signer.
	"internal/andd.NewFeatureExtractor":    "the seam of learning the model",
	"internal/andd.FeatureExtractor.Terms": "the seam of learning the model",
	// The match model's features and file format are the product's (the
	// embedded data/match-model.json); fitting it is the lab's (nddlab
	// train calibration, eval calibration): the lookup's measurements of
	// every campaign found, matched or not, and a fitted model to weigh.
	"internal/campaign.Checker.Inspect":        "the seam of fitting the match model",
	"internal/campaign.Inspected.Campaign":     "the seam of fitting the match model",
	"internal/campaign.Inspected.Inputs":       "the seam of fitting the match model",
	"internal/campaign.MatchInputs":            "the seam of fitting the match model",
	"internal/campaign.MatchFeatures":          "the seam of fitting the match model",
	"internal/campaign.MatchFeatureNames":      "the seam of fitting the match model",
	"internal/campaign.MatchModel":             "the seam of fitting the match model",
	"internal/campaign.MatchModel.Probability": "the seam of fitting the match model",
	"internal/campaign.NewMatchModel":          "the seam of fitting the match model",
	"internal/campaign.ParseMatchModel":        "the seam of fitting the match model",
	"internal/campaign.DefaultMatchModel":      "the seam of fitting the match model",
	"internal/campaign.Policy.WithMatchModel":  "the seam of fitting the match model",
	// The zero-hour purge scenario (nddlab eval zap) runs the real
	// engine, ledger and purger on a simulated clock, one step at a time
	// (the daemon runs them on the wall clock, in their own loops).
	"internal/campaign.Options.Clock":       "the seam of the simulated clock",
	"internal/store.Options.Now":            "the seam of the simulated clock",
	"internal/ledger.Options.Clock":         "the seam of the simulated clock",
	"internal/zap.Options.Clock":            "the seam of the simulated clock",
	"internal/ledger.Options.FlushInterval": "the seam of the simulated clock: the scenario writes the batches",
	"internal/ledger.Ledger.Flush":          "the seam of the simulated clock: the scenario writes the batches",
	"internal/zap.Purger.Scan":              "the seam of the simulated clock: the purger's steps",
	"internal/zap.Purger.Work":              "the seam of the simulated clock: the purger's steps",
}

// labOnlyDebt reads testdata/lab-only-exports.txt: the identifiers
// exported for the lab only that are still to be moved or used (one a
// line, # comments).
func labOnlyDebt(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "lab-only-exports.txt"))
	if err != nil {
		t.Fatal(err)
	}
	debt := map[string]bool{}
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			debt[line] = true
		}
	}
	return debt
}

// listed is a package of go list -export: its files and export data.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Export     string
	ImportMap  map[string]string
	ForTest    string
	Standard   bool
}

// goListExport runs go list -deps -export on patterns (with their tests
// when tests) and returns the packages by import path.
func goListExport(t *testing.T, tests bool, patterns ...string) map[string]*listed {
	t.Helper()
	args := []string{"list", "-e", "-deps", "-export", "-json=ImportPath,Name,Dir,GoFiles,Export,ImportMap,ForTest,Standard"}
	if tests {
		args = append(args, "-test")
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[p.ImportPath] = &p
	}
	return pkgs
}

// relPath is the module-relative path of a package as go list names it
// (test variants "p [q.test]" and external tests "p_test" included), and
// whether it is the module's.
func relPath(importPath string) (string, bool) {
	p, _, _ := strings.Cut(importPath, " ")
	p = strings.TrimSuffix(p, "_test")
	return strings.CutPrefix(p, module)
}

// isProduct: a package of the product (not the lab, not a program).
func isProduct(rel string) bool { return !isLab(rel) && !isTool(rel) }

// isProductProgram: the shipped programs.
func isProductProgram(rel string) bool { return rel == "cmd/nddmilter" || rel == "cmd/nddmilter-pipe" }

// objectKey names an exported object of a product package the same way
// wherever it is seen: package, name (methods and fields with their
// type's name when known) and declaring position, which export data
// keeps.
func objectKey(fset *token.FileSet, obj types.Object) string {
	pos := fset.Position(obj.Pos())
	path, _, _ := strings.Cut(obj.Pkg().Path(), " ")
	return fmt.Sprintf("%s\x00%s\x00%s:%d", path, obj.Name(), filepath.Base(pos.Filename), pos.Line)
}

// exportedObjects lists the exported package-level objects of the package
// at path, the exported methods of its named types and the exported
// fields of its struct types, by objectKey, with a readable name.
func exportedObjects(pkgs map[string]*listed, path string) (map[string]exported, error) {
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", exportLookup(pkgs, nil))
	pkg, err := imp.Import(path)
	if err != nil {
		return nil, err
	}
	rel, _ := relPath(path)
	out := map[string]exported{}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		out[objectKey(fset, obj)] = exported{name: rel + "." + name}
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok {
			continue
		}
		for m := range named.Methods() {
			if m.Exported() && !interfaceMethod[m.Name()] {
				out[objectKey(fset, m)] = exported{name: rel + "." + name + "." + m.Name(), method: m.Name()}
			}
		}
		switch u := named.Underlying().(type) {
		case *types.Struct:
			for i := range u.NumFields() {
				f := u.Field(i)
				// A field with an encoding tag is exported for the encoding
				// (a file format), whoever sets it.
				tag := reflect.StructTag(u.Tag(i))
				if _, encoded := tag.Lookup("json"); encoded {
					continue
				}
				if _, encoded := tag.Lookup("yaml"); encoded {
					continue
				}
				if f.Exported() && !f.Embedded() {
					out[objectKey(fset, f)] = exported{name: rel + "." + name + "." + f.Name()}
				}
			}
		case *types.Interface:
			for m := range u.ExplicitMethods() {
				if m.Exported() {
					out[objectKey(fset, m)] = exported{name: rel + "." + name + "." + m.Name()}
				}
			}
		}
	}
	return out, nil
}

// exported is an exported object: its readable name, and its method
// name when it is a method of a named type.
type exported struct {
	name   string
	method string
}

// interfaceMethod are method names a type has to satisfy a standard
// interface (fmt, errors, encoding, io, net/http, sort): their users call
// them through the interface, which the check does not see.
var interfaceMethod = map[string]bool{
	"String": true, "GoString": true, "Format": true, "Error": true, "Unwrap": true, "Is": true, "As": true,
	"MarshalJSON": true, "UnmarshalJSON": true, "MarshalText": true, "UnmarshalText": true,
	"MarshalBinary": true, "UnmarshalBinary": true, "MarshalYAML": true, "UnmarshalYAML": true,
	"Read": true, "Write": true, "Close": true, "WriteTo": true, "ReadFrom": true, "ServeHTTP": true,
	"Len": true, "Less": true, "Swap": true,
}

// exportLookup finds export data: an import path, mapped by importMap
// (vendored and test-variant packages), to the file go list built.
func exportLookup(pkgs map[string]*listed, importMap map[string]string) func(string) (io.ReadCloser, error) {
	return func(path string) (io.ReadCloser, error) {
		if m, ok := importMap[path]; ok {
			path = m
		}
		p, ok := pkgs[path]
		if !ok || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	}
}

// used are the objects a set of packages names: by objectKey, and the
// names of the interface methods they call (a method of a named type
// called through an interface counts as used under its name: the check
// does not resolve which types reach the call).
type used struct {
	keys      map[string]bool
	viaIfaces map[string]bool
}

func newUsed() *used { return &used{keys: map[string]bool{}, viaIfaces: map[string]bool{}} }

// uses type-checks the package p from its source files and adds what it
// names of the module's other packages to u.
func uses(pkgs map[string]*listed, p *listed, u *used) error {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range p.GoFiles {
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	var errs []error
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", exportLookup(pkgs, p.ImportMap)),
		Error:    func(err error) { errs = append(errs, err) },
	}
	own, _ := relPath(p.ImportPath)
	conf.Check(p.ImportPath, fset, files, info)
	if len(errs) > 0 {
		return fmt.Errorf("type-checking %s: %w (and %d more)", p.ImportPath, errs[0], len(errs)-1)
	}
	for _, obj := range info.Uses {
		if obj == nil || obj.Pkg() == nil || !obj.Exported() {
			continue
		}
		if f, ok := obj.(*types.Func); ok {
			if recv := f.Signature().Recv(); recv != nil && types.IsInterface(recv.Type()) {
				u.viaIfaces[f.Name()] = true
			}
		}
		rel, ok := relPath(obj.Pkg().Path())
		if !ok || rel == own {
			continue
		}
		switch o := obj.(type) {
		case *types.Func:
			obj = o.Origin()
		case *types.Var:
			obj = o.Origin()
		}
		u.keys[objectKey(fset, obj)] = true
	}
	return nil
}

// TestNoExportForTheLabOnly: no product package exports an identifier
// that only the lab uses (its packages and programs, tests included):
// the lab adapts to the product, not the product to the lab. A user is
// another product package or a shipped program (cmd/nddmilter,
// cmd/nddmilter-pipe), tests not counted; exceptions are in
// labOnlyAllowed with their reason, and the debt still to pay off in
// testdata/lab-only-exports.txt.
func TestNoExportForTheLabOnly(t *testing.T) {
	debt := labOnlyDebt(t)
	product := goListExport(t, false, "./...")
	lab := goListExport(t, true, "./internal/lab/...", "./cmd/nddlab", "./scripts/...")

	productUsed, labUsed := newUsed(), newUsed()
	for path, p := range product {
		rel, ok := relPath(path)
		if !ok || !(isProduct(rel) || isProductProgram(rel)) {
			continue
		}
		if err := uses(product, p, productUsed); err != nil {
			t.Fatal(err)
		}
	}
	for path, p := range lab {
		rel, ok := relPath(path)
		if !ok || !(isLab(rel) || isTool(rel) && !isProductProgram(rel)) || strings.HasSuffix(path, ".test") {
			continue
		}
		if err := uses(lab, p, labUsed); err != nil {
			t.Fatal(err)
		}
	}

	var bad []string
	seen := map[string]bool{}
	for path, p := range product {
		rel, ok := relPath(path)
		if !ok || !isProduct(rel) || p.Name == "main" {
			continue
		}
		objs, err := exportedObjects(product, path)
		if err != nil {
			t.Fatalf("export data of %s: %v", path, err)
		}
		for key, obj := range objs {
			if !labUsed.keys[key] || productUsed.keys[key] || obj.method != "" && productUsed.viaIfaces[obj.method] {
				continue
			}
			seen[obj.name] = true
			if _, ok := labOnlyAllowed[obj.name]; !ok && !debt[obj.name] {
				bad = append(bad, obj.name)
			}
		}
	}
	slices.Sort(bad)
	for _, name := range bad {
		t.Errorf("%s is exported for the lab only: move what the lab needs into internal/lab, or use the product's public API", name)
	}
	for name := range labOnlyAllowed {
		if !seen[name] {
			t.Errorf("labOnlyAllowed lists %s, which is not exported for the lab only: remove it", name)
		}
	}
	for name := range debt {
		if !seen[name] {
			t.Errorf("testdata/lab-only-exports.txt lists %s, which is not exported for the lab only: remove its line", name)
		}
	}
}
