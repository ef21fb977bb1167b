//go:build !unix

package imatchbag

import "time"

func cpuTime() time.Duration { return 0 }
