//go:build !unix

package mime

func processCPU() int64 { return 0 }
