package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigAsServe: every configuration CheckConfig refuses, serve
// refuses too (and a good one passes both): missing or corrupt lexicon,
// model and token files, a short token, absurd timeouts.
func TestCheckConfigAsServe(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corrupt := write("corrupt", "this is not a lexicon nor a model\n")
	shortTok := write("short-token", "abc\n")
	goodTok := write("good-token", "0123456789abcdef0123\n")
	notDir := write("not-a-dir", "x")
	// Each case adds keys to the milter, http or store section, or whole
	// other sections.
	tests := []struct {
		name, milter, http, store, other, want string
	}{
		{name: "good", http: "  token_file: " + goodTok + "\n"},
		{name: "missing lexicon", other: "signatures:\n  lexicon: " + filepath.Join(dir, "nope.lex") + "\n", want: "signatures.lexicon"},
		{name: "corrupt lexicon", other: "signatures:\n  lexicon: " + corrupt + "\n", want: "signatures.lexicon"},
		{name: "missing model", other: "andd:\n  model: " + filepath.Join(dir, "nope.json") + "\n", want: "andd.model"},
		{name: "corrupt model", other: "andd:\n  model: " + corrupt + "\n", want: "andd.model"},
		{name: "missing token file", http: "  token_file: " + filepath.Join(dir, "nope") + "\n", want: "http.token_file"},
		{name: "short token file", http: "  token_file: " + shortTok + "\n", want: "at least 16"},
		{name: "short token", http: "  token: a\n", want: "at least 16"},
		{name: "absurd check timeout", milter: "  check_timeout: 1ns\n", want: "milter.check_timeout"},
		{name: "store not a directory", store: notDir, want: "not a directory"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			storeDir := tt.store
			if storeDir == "" {
				storeDir = filepath.Join(dir, fmt.Sprint("store", i))
			}
			a := freeAddrs(t, 2)
			cfgPath := write(fmt.Sprintf("c%d.yaml", i), "milter:\n  listen: inet:"+a[0]+"\n"+tt.milter+
				"http:\n  listen: "+a[1]+"\n"+tt.http+"store:\n  dir: "+storeDir+"\n"+tt.other)
			cfg, loadErr := LoadConfig(cfgPath, "")
			var checkErr error
			if loadErr == nil {
				var v Versions
				v, checkErr = CheckConfig(cfg)
				if checkErr == nil && v.Lexicon == "" {
					t.Errorf("no lexicon id")
				}
			} else {
				checkErr = loadErr
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a good configuration starts and stops at once
			runErr := Run(ctx, Options{ConfigPath: cfgPath, LogOutput: io.Discard})
			if tt.want == "" {
				if checkErr != nil || runErr != nil {
					t.Fatalf("good configuration: check %v, serve %v", checkErr, runErr)
				}
				return
			}
			if checkErr == nil || !strings.Contains(checkErr.Error(), tt.want) {
				t.Errorf("config check: %v, want %q", checkErr, tt.want)
			}
			if runErr == nil {
				t.Errorf("serve accepted what config check refused (%v)", checkErr)
			}
		})
	}
}
