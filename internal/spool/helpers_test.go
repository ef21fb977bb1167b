package spool

import "context"

// drain runs s.Drain with a background context.
func drain(s *Spool, store func(context.Context, Report) error) (DrainStats, error) {
	return s.Drain(context.Background(), store)
}
