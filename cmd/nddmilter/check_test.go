package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/nddmilter/nddmilter/internal/store"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nddmilter/nddmilter/internal/campaign"
	"github.com/nddmilter/nddmilter/internal/mailbox"
)

// checkAll prints the results in input order whatever order the checks
// finish in, and stops at the first error of the printer.
func TestCheckAllInOrder(t *testing.T) {
	dir := t.TempDir()
	const n = 200
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.eml", i)), []byte(fmt.Sprintf("Subject: %d\r\n\r\n%d\r\n", i, i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(_ context.Context, raw []byte) (campaign.Verdict, error) {
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		_, body, _ := strings.Cut(string(raw), "\r\n\r\n")
		id, err := strconv.Atoi(strings.TrimSpace(body))
		return campaign.Verdict{Campaign: store.CampaignID(id)}, err
	}
	for _, jobs := range []int{1, 3, 16} {
		var got []store.CampaignID
		err := checkAll(context.Background(), []string{dir}, mailbox.Options{}, jobs, check, func(c *checked) error {
			if c.err != nil {
				return c.err
			}
			got = append(got, c.v.Campaign)
			return nil
		})
		if err != nil || len(got) != n {
			t.Fatalf("jobs %d: %d results, %v", jobs, len(got), err)
		}
		for i, id := range got {
			if int(id) != i {
				t.Fatalf("jobs %d: result %d is message %d", jobs, i, id)
			}
		}
	}
	stop := errors.New("stop")
	printed := 0
	err := checkAll(context.Background(), []string{dir}, mailbox.Options{}, 4, check, func(c *checked) error {
		if printed++; printed == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || printed != 10 {
		t.Errorf("printer error: %v after %d", err, printed)
	}
}
