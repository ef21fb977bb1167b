package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the module's root, seen from this package's directory.
const repoRoot = "../.."

// docFiles are the Markdown pages whose links TestDocLinks checks: the
// README, DEVELOPERS.md, every page under docs/ and the contrib guides.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "DEVELOPERS.md"}
	for _, pattern := range []string{"contrib/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(repoRoot, f)
			files = append(files, rel)
		}
	}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repoRoot, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	htmlSrc  = regexp.MustCompile(`<img [^>]*src="([^"]+)"`)
	heading  = regexp.MustCompile(`^#{1,6} (.+)$`)
	notSlug  = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	fenceRun = regexp.MustCompile("^\\s*```")
)

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRun.MatchString(line) {
			inFence = !inFence
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil && !inFence {
			s := strings.ToLower(strings.TrimSpace(m[1]))
			s = notSlug.ReplaceAllString(s, "")
			out[strings.ReplaceAll(s, " ", "-")] = true
		}
	}
	return out
}

// links are the relative link targets of a Markdown text, outside code.
func links(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRun.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence || strings.HasPrefix(line, "    ") {
			continue
		}
		for _, re := range []*regexp.Regexp{mdLink, htmlSrc} {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// TestDocLinks: every relative link of the documentation names a file
// that exists, and every #anchor a heading of its page.
func TestDocLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := cache[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		cache[path] = anchors(string(b))
		return cache[path]
	}
	n := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(b)) {
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			n++
			target, anchor, _ := strings.Cut(l, "#")
			path := filepath.Join(repoRoot, f)
			if target != "" {
				path = filepath.Join(repoRoot, filepath.Dir(f), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: no such file", f, l)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s: link %s: no heading with that anchor", f, l)
			}
		}
	}
	if n == 0 {
		t.Fatal("no relative link found: is the repository root right?")
	}
}
