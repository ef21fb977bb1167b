package api

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/nddmilter/nddmilter/internal/campaign"
)

// TestJSONNaming: every key of every JSON answer is snake_case, so that
// clients meet one naming rule (store/stats and store/verify answered in
// Go's field names once).
func TestJSONNaming(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	seen := map[reflect.Type]bool{}
	var walk func(path string, ty reflect.Type)
	walk = func(path string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Array || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty.PkgPath() == "time" {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			name, _, _ := cut(tag)
			switch {
			case name == "-":
				continue
			case name == "" && f.Anonymous:
				walk(path, f.Type)
				continue
			case !snake.MatchString(name):
				t.Errorf("%s.%s: JSON key %q is not snake_case", path, f.Name, name)
			}
			walk(path+"."+name, f.Type)
		}
	}
	for _, v := range []any{Outcome{}, Summary{}, Watched{}, HamSender{}, Hour{}, HourTotal{}, RankedSummary{},
		Now{}, Day{}, Detail{}, Reporter{}, StoreStats{}, VerifyAnswer{}, Purge{}, UndoneAnswer{}, campaign.Verdict{}} {
		ty := reflect.TypeOf(v)
		walk(ty.Name(), ty)
	}
}

func cut(tag string) (name, rest string, ok bool) {
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i], tag[i+1:], true
		}
	}
	return tag, "", false
}
