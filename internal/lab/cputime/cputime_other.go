//go:build !linux

package cputime

import "time"

const haveThread = false

func process() time.Duration { return 0 }

func thread() time.Duration { return 0 }
