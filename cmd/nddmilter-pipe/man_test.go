package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestManPage: the man page (packaging/man/nddmilter-pipe.1) describes
// every flag the program takes.
func TestManPage(t *testing.T) {
	man, err := os.ReadFile("../../packaging/man/nddmilter-pipe.1")
	if err != nil {
		t.Fatal(err)
	}
	var usage bytes.Buffer
	if code := run([]string{"-h"}, strings.NewReader(""), &bytes.Buffer{}, &usage); code != 2 {
		t.Fatalf("-h: exit %d", code)
	}
	flags := regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(usage.String(), -1)
	if len(flags) == 0 {
		t.Fatalf("no flags in the usage:\n%s", usage.String())
	}
	for _, f := range flags {
		if !strings.Contains(string(man), `\-`+f[1]) {
			t.Errorf("the man page does not describe -%s", f[1])
		}
	}
}
