package zap

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// UserMap turns an envelope recipient into the mailbox user whose
// mailboxes hold its copy ("" when there is none).
type UserMap func(rcpt string) string

// User map rules of ParseUserMap.
const (
	MapAsIs      = "as-is"      // the address as the MTA sent it, lower-cased
	MapLocalPart = "local-part" // the part before the last '@', lower-cased
	MapFile      = "file:"      // a lookup table: "address user" per line
)

// ParseUserMap reads a rule: "as-is" (default when empty), "local-part",
// or "file:PATH", a table of "address user" lines ('#' starts a comment;
// the address is compared lower-cased; a recipient not in the table has
// no mailbox user and is skipped).
func ParseUserMap(spec string) (UserMap, error) {
	switch {
	case spec == "" || spec == MapAsIs:
		return func(r string) string { return strings.ToLower(strings.Trim(r, "<> ")) }, nil
	case spec == MapLocalPart:
		return func(r string) string {
			r = strings.ToLower(strings.Trim(r, "<> "))
			if i := strings.LastIndexByte(r, '@'); i >= 0 {
				r = r[:i]
			}
			return r
		}, nil
	case strings.HasPrefix(spec, MapFile):
		path := strings.TrimPrefix(spec, MapFile)
		table, err := readTable(path)
		if err != nil {
			return nil, err
		}
		return func(r string) string { return table[strings.ToLower(strings.Trim(r, "<> "))] }, nil
	}
	return nil, fmt.Errorf("zap user_map %q: want %s, %s or %sPATH", spec, MapAsIs, MapLocalPart, MapFile)
}

func readTable(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("zap user_map: %w", err)
	}
	defer f.Close()
	table := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		switch len(fields) {
		case 0:
			continue
		case 2:
			table[strings.ToLower(fields[0])] = fields[1]
		default:
			return nil, fmt.Errorf("zap user_map %s:%d: want \"address user\"", path, n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("zap user_map %s: %w", path, err)
	}
	return table, nil
}
