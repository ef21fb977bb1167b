package eval

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResultsWriteAndReadSpeed prints results as JSON, reads the speed
// section back as `eval all --speed-from` does, and checks the recorded
// command is quoted for a shell.
func TestResultsWriteAndReadSpeed(t *testing.T) {
	r := &Results{Speed: &SpeedResult{}}
	var out bytes.Buffer
	if err := r.Write(&out, OutputOptions{Args: []string{"eval", "speed", "--corpus", "a b"}, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Command != "nddlab eval speed --corpus 'a b'" {
		t.Errorf("command %q", back.Command)
	}
	path := filepath.Join(t.TempDir(), "speed.json")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sp, err := ReadSpeed(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sp.Measured, back.Command) {
		t.Errorf("measured %q lacks the command", sp.Measured)
	}
	if err := os.WriteFile(path, []byte(`{"date":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSpeed(path); err == nil || !strings.Contains(err.Error(), "no speed section") {
		t.Errorf("no speed section: %v", err)
	}
}
