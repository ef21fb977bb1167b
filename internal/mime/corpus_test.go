package mime

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// loadCorpus reads every regular file under the directory named by
// NDD_CORPUS (e.g. the SpamAssassin public corpus fetched by
// scripts/fetch-corpus.sh into .cache/spamassassin), or skips.
func loadCorpus(tb testing.TB) (msgs [][]byte, total int) {
	tb.Helper()
	dir := os.Getenv("NDD_CORPUS")
	if dir == "" {
		tb.Skip("set NDD_CORPUS to a directory of messages")
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") || d.Name() == "cmds" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		msgs = append(msgs, b)
		total += len(b)
		return nil
	})
	if err != nil {
		tb.Fatalf("load corpus: %v", err)
	}
	if len(msgs) == 0 {
		tb.Fatalf("no messages under %s", dir)
	}
	return msgs, total
}

// TestCorpus parses a real corpus and reports the fallbacks taken, grouped
// by warning kind (numbers and quoted names folded).
func TestCorpus(t *testing.T) {
	msgs, total := loadCorpus(t)
	norm := regexp.MustCompile(`"[^"]*"|\d+`)
	kinds := map[string]int{}
	empty := 0
	for _, m := range msgs {
		d := Parse(m, Options{})
		for _, w := range d.Warnings {
			if strings.HasPrefix(w, "internal error") {
				t.Errorf("panic: %s", w)
			}
			kinds[norm.ReplaceAllString(w, "_")]++
		}
		if !utf8.ValidString(d.Text) || !utf8.ValidString(d.Subject) {
			t.Errorf("invalid UTF-8 from message %q", d.MessageID)
		}
		if len(Tokenize(d, TokenOptions{})) == 0 {
			empty++
		}
	}
	t.Logf("%d messages, %d bytes (%.1f KB average), %d without any token", len(msgs), total, float64(total)/float64(len(msgs))/1024, empty)
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return kinds[keys[i]] > kinds[keys[j]] })
	for _, k := range keys {
		t.Logf("%6d  %s", kinds[k], k)
	}
}
